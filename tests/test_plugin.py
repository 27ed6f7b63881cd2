"""The pytest plugin, tested with pytester: markers, options, the seed header and per-test seeds. A scratch project's
session acts as the harness's once it passes a harness option (harness/plugin/options.py harness_session)."""

from __future__ import annotations

import re

import pytest

from harness.contract.seeds import derive_seed

pytest_plugins = ["pytester"]

SEED_RECORDER = """
import pathlib

def test_a(test_seed):
    pathlib.Path("seed-test_a").write_text(str(test_seed))

def test_b(test_seed):
    pathlib.Path("seed-test_b").write_text(str(test_seed))
"""


def _recorded_seeds(pytester, source: str, *args: str) -> dict[str, int]:
    """Run `source` in a fresh pytest process; each test writes its seed to a file (works under xdist too)."""
    pytester.makepyfile(test_seeds=source)
    for old in pytester.path.glob("seed-*"):
        old.unlink()
    result = pytester.runpytest_subprocess(*args)
    assert result.ret == 0, result.stdout.str()
    return {f.name.removeprefix("seed-"): int(f.read_text()) for f in pytester.path.glob("seed-*")}


def test_it_registers_the_harness_markers_strictly(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.greedy
        @pytest.mark.sampling
        @pytest.mark.invariants
        @pytest.mark.gpu
        @pytest.mark.slow
        def test_marked():
            pass

        @pytest.mark.greedyy
        def test_typo():
            pass
    """)
    result = pytester.runpytest("--strict-markers", "--harness-budget=smoke")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*'greedyy' not found in `markers` configuration option*"])


def test_it_shows_its_options_in_one_group(pytester):
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(
        [
            "mtp-harness: MTP decoding correctness:",
            "*--harness-decoder=NAME*",
            "*--harness-device=DEVICE*",
            "*--harness-dtype=DTYPE*",
            "*--harness-model=DIR|FIXTURE*",
            "*--harness-seed=SEED*",
        ]
    )


def test_it_prints_the_session_seed_in_the_header(pytester):
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest("--harness-seed=1234")
    result.stdout.fnmatch_lines(["mtp-harness: session seed 1234 (replay: --harness-seed=1234), decoder mtp, *"])


def test_per_test_seed_is_session_seed_plus_crc32_of_the_node_id(pytester):
    assert _recorded_seeds(pytester, SEED_RECORDER, "--harness-seed=77") == {
        name: derive_seed(77, f"test_seeds.py::{name}") for name in ("test_a", "test_b")
    }


def test_per_test_seed_does_not_move_when_tests_are_added_or_reordered(pytester):
    before = _recorded_seeds(pytester, SEED_RECORDER, "--harness-seed=5")
    a, b = SEED_RECORDER.split("def test_b")
    reordered = (
        "import pathlib\n\ndef test_new(test_seed):\n    pass\n\ndef test_b" + b + a.replace("import pathlib", "")
    )
    after = _recorded_seeds(pytester, reordered, "--harness-seed=5")
    assert after == before


def test_xdist_workers_use_the_controllers_random_seed(pytester):
    pytest.importorskip("xdist", reason="pytest-xdist is a project dependency: reinstall with `pip install -e .`")
    pytester.makepyfile(test_seeds=SEED_RECORDER)
    result = pytester.runpytest_subprocess("--harness-seed=random", "-n", "2")
    result.assert_outcomes(passed=2)
    session_seed = int(re.search(r"session seed (\d+)", result.stdout.str())[1])
    seeds = {f.name.removeprefix("seed-"): int(f.read_text()) for f in pytester.path.glob("seed-*")}
    assert seeds == {name: derive_seed(session_seed, f"test_seeds.py::{name}") for name in ("test_a", "test_b")}


def test_last_replays_the_previous_seed(pytester):
    pytester.makepyfile("def test_ok(): pass")
    pytester.runpytest("--harness-seed=random")
    first = re.search(r"session seed (\d+)", pytester.runpytest("--harness-seed=last").stdout.str())[1]
    second = re.search(r"session seed (\d+)", pytester.runpytest("--harness-seed=last").stdout.str())[1]
    assert first == second


def test_a_bad_seed_is_a_usage_error(pytester):
    pytester.makepyfile("def test_ok(): pass")
    result = pytester.runpytest_subprocess("--harness-seed=abc")
    lines = [line for line in result.outlines + result.errlines if line.strip()]
    assert len(lines) == 1 and "mtp-harness: --harness-seed abc: not an integer, 'random' or 'last'" in lines[0]
    assert result.ret == 2, "a usage error stops the run with exit status 2 (harness/subjects/run_options.py)"


def test_slow_tests_run_only_when_asked_for(pytester):
    pytester.makepyfile("""
        import pytest

        @pytest.mark.slow
        @pytest.mark.sampling
        def test_calibration():
            pass

        @pytest.mark.sampling
        def test_case():
            pass
    """)
    pytester.runpytest("-m", "sampling", "--harness-budget=ci").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest("-m", "sampling and slow", "--harness-budget=ci").assert_outcomes(passed=1, deselected=1)
    pytester.runpytest("--harness-slow").assert_outcomes(passed=2)
