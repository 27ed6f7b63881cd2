"""The recorder: every case's structured result lands in results.json and index.html, the same with or
without pytest-xdist, and a run that is interrupted or whose decoder raises still leaves its report."""

from __future__ import annotations

import json

from harness.contract.paths import SUITES_DIR
from harness.contract.records import Results, record_problems

pytest_plugins = ["pytester"]

# a greedy failure, a sampling failure and an invariants failure on one mutant, plus passing cases
SELECTION = [
    str(SUITES_DIR / "greedy" / "test_greedy_identity.py") + "::test_natural_drafts_reproduce_the_reference",
    str(SUITES_DIR / "sampling" / "test_target_distribution.py"),
    str(SUITES_DIR / "invariants" / "test_state_after_every_pass.py"),
    str(SUITES_DIR / "invariants" / "test_acceptance_profile.py"),
]
FILTER = "natural-01 or natural-02-k1 or T1.0-nofilter-k1-greedy or forced_rejections and 1-k2 or accounts"
VOLATILE_RUN_FIELDS = ("run_id", "started", "finished", "command", "workers")


def run_selection(pytester, report_dir, *extra):
    return pytester.runpytest_inprocess(
        *SELECTION,
        "-k",
        FILTER,
        "-m",
        "greedy or sampling or invariants",
        "--harness-decoder=mutant:position-offset",
        f"--harness-report={report_dir}",
        "-q",
        "-p",
        "no:cacheprovider",
        *extra,
    )


def comparable(results):
    """results.json without what legitimately differs between two runs: times (durations, the measured head
    cost, the time shrinking took) and the command line."""
    run = {key: value for key, value in results["run"].items() if key not in VOLATILE_RUN_FIELDS}
    cases = [{key: value for key, value in case.items() if key != "duration_s"} for case in results["cases"]]
    acceptance = {key: value for key, value in results["acceptance"].items() if key != "head_cost_vs_verify"}
    groups = [
        {**group, "minimal": {key: value for key, value in (group["minimal"] or {}).items() if key != "elapsed_s"}}
        for group in results["groups"]
    ]
    return {**results, "run": run, "cases": cases, "acceptance": acceptance, "groups": groups}


def test_results_record_every_case_with_its_structured_record(pytester, tmp_path):
    result = run_selection(pytester, tmp_path / "run")
    assert result.parseoutcomes().get("failed", 0) >= 3, result.stdout.str()[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["run"]["status"] == "complete" and results["run"]["decoder"] == "mutant:position-offset"
    assert results["run"]["command"].endswith("--harness-seed=20261129")
    by_suite = {}
    for case in results["cases"]:
        by_suite.setdefault(case["suite"], []).append(case)
    assert set(by_suite) == {"greedy", "sampling", "invariants"}
    greedy = [c for c in by_suite["greedy"] if c["outcome"] == "failed"]
    assert greedy and all(c["divergence"]["top5"] and c["divergence"]["steps"] for c in greedy)
    assert greedy[0]["divergence"]["reference_tokens"][0]["text"], "token text is recorded"
    assert greedy[0]["params"]["prompt"] in ("natural-01", "natural-02")
    sampling = by_suite["sampling"][0]["sampling"]
    assert sampling["rejected"] and sampling["cells_table"] and len(sampling["p_values"]) == 2
    invariants = [c for c in by_suite["invariants"] if c["invariants"]]
    assert invariants and invariants[0]["invariants"]["violations"][0]["invariant"]
    page = (tmp_path / "run" / "index.html").read_text()
    assert "DIVERGENCE" in page and "position ids" in page
    assert record_problems(Results, results) == [], "every record has the keys harness/contract/records.py declares"


def test_the_report_is_the_same_with_and_without_xdist(pytester, tmp_path):
    run_selection(pytester, tmp_path / "serial")
    run_selection(pytester, tmp_path / "xdist", "-n", "2", "--dist", "loadgroup")
    serial = json.loads((tmp_path / "serial" / "results.json").read_text())
    parallel = json.loads((tmp_path / "xdist" / "results.json").read_text())
    assert parallel["run"]["workers"] == 2 and serial["run"]["workers"] == 0
    assert len(serial["cases"]) == len(parallel["cases"]) > 5
    assert comparable(serial) == comparable(parallel)


def test_an_interrupted_run_keeps_the_cases_it_finished(pytester, tmp_path):
    pytester.makepyfile(
        test_interrupted="""
        def test_first():
            pass

        def test_second():
            raise KeyboardInterrupt

        def test_never_reached():
            pass
        """
    )
    pytester.runpytest_subprocess(f"--harness-report={tmp_path / 'run'}", "-p", "no:cacheprovider")
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["run"]["status"] == "interrupted"
    assert [c["case"] for c in results["cases"] if c["outcome"] == "passed"] == ["test_first"]
    assert "interrupted" in (tmp_path / "run" / "index.html").read_text()


def test_a_decoder_that_raises_is_a_named_failure_and_the_report_is_written(pytester, tmp_path):
    pytester.makepyfile(
        broken_decoder="""
        class Broken:
            name = "broken"

            def decode(self, requests):
                raise RuntimeError("engine fell over: CUDA graph capture failed")


        def make(bundle, device, dtype):
            return Broken()
        """
    )
    pytester.syspathinsert()
    node = str(SUITES_DIR / "greedy" / "test_greedy_identity.py") + "::test_natural_drafts_reproduce_the_reference"
    pytester.runpytest_inprocess(
        node,
        "-k",
        "natural-01-k1",
        "--harness-decoder=broken_decoder:make",
        f"--harness-report={tmp_path / 'run'}",
        "-q",
    )
    [case] = json.loads((tmp_path / "run" / "results.json").read_text())["cases"]
    assert case["outcome"] == "failed" and "engine fell over" in case["message"]
    assert "engine fell over" in (tmp_path / "run" / "index.html").read_text()


def test_an_expected_failure_is_recorded_as_xfailed_with_its_reason_and_its_failure(pytester, tmp_path):
    pytester.makepyfile(
        test_known="""
        import pytest

        @pytest.mark.xfail(reason="engine 1.0 bug, docs/findings/x.md", strict=True)
        def test_known_bug():
            assert False, "the engine drops a token"
        """
    )
    pytester.runpytest_inprocess("-p", "no:cacheprovider", f"--harness-report={tmp_path}", "-q")
    [case] = json.loads((tmp_path / "results.json").read_text())["cases"]
    assert case["outcome"] == "xfailed"
    reason, failure = case["message"].split("\n", 1)
    assert reason == "expected failure: engine 1.0 bug, docs/findings/x.md"
    assert "AssertionError: the engine drops a token" in failure, "the failure itself is kept as evidence"
