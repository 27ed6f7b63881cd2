"""An engine is one package and one registry line: the toy engine (fixtures/toy-engine/: the harness's own decoder
behind the engine wire protocol, in a server process of its own, no real engine) joins the harness with its package
and the one entry-point line below, and every front end then knows it: the door, the plugin, the command line, the
report. A greedy slice through it passes, and fails once its bug is switched on (`--engine-arg corrupt_at=3`).

The same toy carries every option of a run but the reference (decoder, model, device, dtype, budget, seed, engine
configuration, fixes and arguments): the command a failure group prints, run as printed, replays the failure with
every one of them, and minimal-case shrinking runs the decoder under the run's own engine options. With the engine
as its own reference (`--reference engine`), which the toy does not offer, vLLM shows the same:
tests/test_vllm_failure_triage.py."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.contract.paths import DATA_ROOT

TOY = DATA_ROOT / "fixtures" / "toy-engine" / "toy_engine"
REGISTRY_LINE = "toy = toy_engine:ENGINE"  # the entry point of the group mtp_harness.engines
SLICE = "natural-01 and k2 and (natural_drafts or every-position-separated or max_new_tokens)"
CORRUPTED_POSITION = 3
EVERY_OPTION = [
    "--decoder", "toy-mtp", "--model", "tiny-deepseek-v3", "--device", "cpu", "--dtype", "float32",
    "--budget", "smoke", "--harness-seed", "1234", "--engine-config", "one-at-a-time",
    "--engine-fixes", "all", "--engine-arg", f"corrupt_at={CORRUPTED_POSITION}",
]  # fmt: skip

pytestmark = pytest.mark.xdist_group("toy-engine")


@pytest.fixture(scope="module")
def toy_environment(tmp_path_factory) -> dict[str, str]:
    """The process environment of a machine where the toy engine is installed: its package, and a distribution that
    declares the one registry line (what `pip install fixtures/toy-engine` writes); its Python is the harness's own."""
    site = tmp_path_factory.mktemp("toy-site")
    shutil.copytree(TOY, site / "toy_engine", ignore=shutil.ignore_patterns("__pycache__"))
    info = site / "toy_engine-0.1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-engine\nVersion: 0.1.0\n")
    (info / "entry_points.txt").write_text(f"[mtp_harness.engines]\n{REGISTRY_LINE}\n")
    path = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    one_thread = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return {**os.environ, **one_thread, "PYTHONPATH": path, "MTP_HARNESS_TOY_PYTHON": sys.executable}


def harness_run(environment: dict[str, str], report: Path, *options: str, selection: str = SLICE) -> dict:
    """`mtp-harness run --suite greedy` on the slice; its results.json."""
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--suite", "greedy", "-n", "0"]
    command += [*options, "--report-dir", str(report), "--", "-k", selection]
    done = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=900, cwd=report.parent)
    found = sorted(report.glob("*/results.json"))
    assert found, f"no results.json:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return json.loads(found[-1].read_text()) | {"exit_status": done.returncode, "log": done.stdout[-3000:]}


def outcomes(results: dict) -> dict[str, str]:
    return {case["nodeid"]: case["outcome"] for case in results["cases"]}


def test_the_toy_joins_the_registry_with_its_package_and_one_registry_line(toy_environment):
    probe = (
        "from harness.subjects.engines.registry import engine_of_decoder, engines\n"
        "from harness.subjects.decoder_registry import known_decoders\n"
        "engine = engine_of_decoder('toy-mtp')\n"
        "print(sorted(engines()), [d for d in known_decoders() if d.startswith('toy')], engine.version('cpu'))\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], env=toy_environment, capture_output=True, text=True)
    expected = "['llama.cpp', 'toy', 'transformers', 'vllm'] ['toy', 'toy-mtp'] 0.1.0"
    assert done.stdout.strip() == expected, done.stderr[-2000:]
    bare = subprocess.run([sys.executable, "-c", probe.replace("engine.version('cpu')", "0")], capture_output=True)
    assert b"'toy'" not in bare.stdout, "without its registry line the toy is unknown"


def test_a_greedy_slice_through_the_toy_passes_and_catches_its_bug(toy_environment, tmp_path):
    shipped = harness_run(toy_environment, tmp_path / "shipped", "--decoder", "toy-mtp", "--dtype", "float32")
    assert shipped["exit_status"] == 0, shipped["log"]
    assert len(outcomes(shipped)) == 3 and set(outcomes(shipped).values()) == {"passed"}
    assert shipped["run"]["engine"] == "toy 0.1.0 (cpu)"
    buggy = harness_run(
        toy_environment, tmp_path / "buggy", "--decoder", "toy-mtp", "--engine-arg", f"corrupt_at={CORRUPTED_POSITION}"
    )
    assert buggy["exit_status"] == 1, buggy["log"]
    failed = [case for case in buggy["cases"] if case["outcome"] == "failed"]
    assert len(failed) == 3 and {case["divergence"]["index"] for case in failed} == {CORRUPTED_POSITION}


@pytest.fixture(scope="module")
def failed_run(toy_environment, tmp_path_factory) -> dict:
    """A run with every option set, failing on the toy's bug, its failure groups shrunk (harness reference)."""
    results = harness_run(toy_environment, tmp_path_factory.mktemp("every-option") / "run", *EVERY_OPTION)
    assert results["exit_status"] == 1 and results["groups"], results["log"]
    return results


def replay(environment: dict[str, str], group: dict, report: Path) -> dict:
    """The group's printed command, run as printed (python: this interpreter), with a report directory added to
    read its outcome and options from."""
    command = shlex.split(group["rerun"])
    assert command[0] == "python"
    done = subprocess.run(
        [sys.executable, *command[1:], f"--harness-report={report}"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=900,
    )
    return json.loads((report / "results.json").read_text()) | {"exit_status": done.returncode, "log": done.stdout}


def test_a_failure_groups_command_replays_the_failure_with_every_option_of_the_run(
    failed_run, toy_environment, tmp_path
):
    group = failed_run["groups"][0]
    replayed = replay(toy_environment, group, tmp_path / "replay")
    assert replayed["exit_status"] == 1, replayed["log"][-3000:]
    assert replayed["run"]["options"] == failed_run["run"]["options"]
    options = replayed["run"]["options"]
    assert options["engine"] == {
        "configuration": "one-at-a-time",
        "fixes": ["toy-engine-reports-no-build"],
        "arguments": [["corrupt_at", CORRUPTED_POSITION]],
        "runner": None,  # the toy engine has one runner: none is asked for
        "patches": [],  # built from no source: no patch of the user's
        "version": None,  # the pinned release
    }
    assert (options["decoder"], options["dtype"], options["budget"], options["seed"]) == (
        "toy-mtp",
        "float32",
        "smoke",
        1234,
    )
    [case] = replayed["cases"]
    original = next(c for c in failed_run["cases"] if c["nodeid"] == group["smallest"])
    assert case["nodeid"] == original["nodeid"] and case["outcome"] == "failed"
    assert case["divergence"]["index"] == original["divergence"]["index"] == CORRUPTED_POSITION


def test_a_failure_group_shrinks_on_the_decoder_under_the_runs_engine_options(failed_run):
    minimal = failed_run["groups"][0]["minimal"]
    assert minimal["reproduced"], "shrunk without the run's engine argument, the bug does not show"
    assert minimal["server_config"]["one_at_a_time"] is True
    assert minimal["server_config"]["arguments"] == {"corrupt_at": CORRUPTED_POSITION}
