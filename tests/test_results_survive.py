"""A run never loses the results it has: killed mid-way by SIGTERM (pytest run or `mtp-harness run`), with an
engine that hangs past its timeout, or with a pytest-xdist worker that crashes, it still leaves a readable
results.json and an HTML report holding every case that finished."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from harness.subjects.engines import process

pytest_plugins = ["pytester"]

SERVER = Path(__file__).with_name("engine_server_for_tests.py")


def wait_for(path: Path, seconds: float = 120.0) -> None:
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.2)


def results_of(report: Path) -> dict:
    results = json.loads((report / "results.json").read_text())
    assert (report / "index.html").is_file(), "the HTML report was written"
    return results


def test_a_run_stopped_by_sigterm_keeps_the_cases_it_finished(pytester, tmp_path):
    started = tmp_path / "slow-started"
    pytester.makepyfile(
        test_killed=f"""
        import time
        from pathlib import Path

        def test_first():
            pass

        def test_second():
            pass

        def test_slow():
            Path({str(started)!r}).write_text("started")
            time.sleep(300)
        """
    )
    report = tmp_path / "run"
    command = [sys.executable, "-m", "pytest", f"--harness-report={report}", "-p", "no:cacheprovider", "-q"]
    run = subprocess.Popen(command, cwd=pytester.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wait_for(started)
    run.send_signal(signal.SIGTERM)
    output = run.communicate(timeout=120)[0]
    results = results_of(report)
    assert results["run"]["status"] == "interrupted", output[-2000:]
    assert sorted(c["case"] for c in results["cases"] if c["outcome"] == "passed") == ["test_first", "test_second"]


def test_mtp_harness_run_hands_sigterm_on_to_pytest(tmp_path):
    """`mtp-harness run` waits for its pytest child; a SIGTERM to it reaches the child, which then stops as on
    Ctrl-C (the child here exits 7 on SIGTERM, as pytest ends its session)."""
    ready = tmp_path / "ready"
    child = f"import signal, sys, time; signal.signal(signal.SIGTERM, lambda *_: sys.exit(7)); open({str(ready)!r}, 'w'); time.sleep(300)"
    script = (
        "import subprocess, sys\n"
        "from harness.contract.invocation import wait_through_ctrl_c\n"
        f"sys.exit(wait_through_ctrl_c(subprocess.Popen([sys.executable, '-c', {child!r}])))\n"
    )
    waiting = subprocess.Popen([sys.executable, "-c", script])
    wait_for(ready)
    waiting.send_signal(signal.SIGTERM)
    assert waiting.wait(timeout=60) == 7


def test_an_engine_that_hangs_past_its_timeout_fails_its_case_and_the_report_holds_it(pytester, tmp_path, monkeypatch):
    monkeypatch.setattr(process, "DECODE_TIMEOUT_SECONDS", 3.0)
    pytester.makepyfile(
        test_hanging_engine=f"""
        import sys
        from pathlib import Path

        from harness.contract.decoder import DecodeRequest
        from harness.contract.paths import FIXTURE_MODELS
        from harness.subjects.engines.process import EngineProcess

        def test_before():
            pass

        def test_a_hanging_engine():
            config = {{"model": str(FIXTURE_MODELS / "tiny-mtp-prefix"), "dtype": "float64", "num_draft_tokens": 1,
                      "draft_mode": "greedy", "mode": "hang-on-decode"}}
            engine = EngineProcess(Path(sys.executable), Path({str(SERVER)!r}), config, {{}}, "hanging")
            engine.decode([DecodeRequest((1, 2, 3), 4)])

        def test_after():
            pass
        """
    )
    report = tmp_path / "run"
    result = pytester.runpytest_inprocess(f"--harness-report={report}", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    results = results_of(report)
    [hung] = [c for c in results["cases"] if c["outcome"] == "failed"]
    assert results["run"]["status"] == "complete" and "no answer after 3 s" in hung["message"]


def test_a_crashed_xdist_worker_is_a_failed_case_and_the_run_goes_on(pytester, tmp_path):
    pytester.makepyfile(
        test_crash="""
        import os

        def test_ok_1():
            pass

        def test_worker_dies():
            os._exit(3)

        def test_ok_2():
            pass
        """
    )
    report = tmp_path / "run"
    result = pytester.runpytest_subprocess(f"--harness-report={report}", "-p", "no:cacheprovider", "-n", "2")
    assert result.ret == 1
    results = results_of(report)
    outcomes = {c["case"]: c["outcome"] for c in results["cases"]}
    assert outcomes == {"test_ok_1": "passed", "test_worker_dies": "error", "test_ok_2": "passed"}, outcomes
    [crashed] = [c for c in results["cases"] if c["outcome"] == "error"]
    assert "crashed while running" in crashed["message"] and results["run"]["status"] == "complete"
    assert os.path.getsize(report / "results.json") > 0
