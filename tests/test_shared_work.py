"""Work shared by the xdist workers of a run (harness/plugin/shared_work.py): each piece computed once, the others'
pieces read, not recomputed; what a computation raises reaches every reader; a dead claimant's piece is claimed again."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from harness.plugin.shared_work import SharedWork


def never(key: str) -> str:
    raise AssertionError(f"{key} was computed a second time")


def test_without_a_directory_every_piece_is_computed_here_in_order():
    computed = []
    values = SharedWork(None, "family").compute_all(["b", "a"], lambda key: computed.append(key) or key.upper())
    assert values == {"b": "B", "a": "A"} and computed == ["b", "a"]


def test_a_piece_published_by_one_worker_is_read_by_another_not_recomputed(tmp_path):
    first, second = SharedWork(tmp_path, "family"), SharedWork(tmp_path, "family")
    assert first.compute_once("x", lambda key: {"p": 0.25}) == {"p": 0.25}
    computed = []
    values = second.compute_all(["x", "y"], lambda key: never(key) if key == "x" else computed.append(key) or 2)
    assert values == {"x": {"p": 0.25}, "y": 2} and computed == ["y"]


def test_a_namespace_keeps_its_pieces_apart(tmp_path):
    SharedWork(tmp_path, "one").compute_once("x", lambda key: 1)
    assert SharedWork(tmp_path, "two").compute_once("x", lambda key: 2) == 2


def test_a_reader_waits_for_a_piece_its_live_claimant_is_computing(tmp_path):
    started, go = threading.Event(), threading.Event()
    claimant_values, reader_values = [], []

    def slow(key: str) -> int:
        started.set()
        go.wait(10)
        return 7

    claimant = threading.Thread(
        target=lambda: claimant_values.append(SharedWork(tmp_path, "f").compute_once("z", slow))
    )
    claimant.start()
    assert started.wait(10)
    reader = threading.Thread(target=lambda: reader_values.append(SharedWork(tmp_path, "f").compute_all(["z"], never)))
    reader.start()
    reader.join(0.3)
    assert reader.is_alive() and not reader_values  # waiting: the claimant has published nothing yet
    go.set()
    claimant.join(10)
    reader.join(10)
    assert claimant_values == [7] and reader_values == [{"z": 7}]


def test_what_a_computation_raises_reaches_every_reader(tmp_path):
    def fails(key: str) -> int:
        raise ValueError(f"engine died on {key}")

    with pytest.raises(ValueError, match="engine died on x"):
        SharedWork(tmp_path, "f").compute_once("x", fails)
    with pytest.raises(ValueError, match="engine died on x"):
        SharedWork(tmp_path, "f").compute_once("x", never)


def test_an_error_that_cannot_be_pickled_travels_as_its_text(tmp_path):
    class Local(Exception):  # a local class: pickle cannot find it by name
        pass

    with pytest.raises(Local):
        SharedWork(tmp_path, "f").compute_once("x", lambda key: (_ for _ in ()).throw(Local("no pickle")))
    with pytest.raises(RuntimeError, match="Local: no pickle"):
        SharedWork(tmp_path, "f").compute_once("x", never)


def test_a_piece_whose_claimant_died_is_claimed_again(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (tmp_path / "f").mkdir()
    (tmp_path / "f" / "x.claim").write_text(str(dead.pid))
    assert SharedWork(tmp_path, "f").compute_all(["x"], lambda key: "again") == {"x": "again"}


CHILD = """
import json, sys, time
from pathlib import Path
from harness.plugin.shared_work import SharedWork
directory, log = Path(sys.argv[1]), Path(sys.argv[2])
def compute(key):
    with open(log / key, "a") as f:
        f.write(sys.argv[3] + "\\n")
    time.sleep(0.02)
    return key * 2
print(json.dumps(SharedWork(directory, "family").compute_all([f"k{i}" for i in range(20)], compute)))
"""


def test_two_processes_compute_every_piece_once_and_both_get_all(tmp_path):
    shared, log = tmp_path / "shared", tmp_path / "log"
    shared.mkdir()
    log.mkdir()
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    workers = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(shared), str(log), name],
            stdout=subprocess.PIPE,
            text=True,
            env=environment,
        )
        for name in ("gw0", "gw1")
    ]
    outputs = [json.loads(worker.communicate(timeout=60)[0]) for worker in workers]
    expected = {f"k{i}": f"k{i}" * 2 for i in range(20)}
    assert outputs == [expected, expected]
    assert sorted(path.name for path in log.iterdir()) == sorted(expected)
    assert all(len(path.read_text().splitlines()) == 1 for path in log.iterdir())  # each computed exactly once
