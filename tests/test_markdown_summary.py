"""`mtp-harness summarize`: the measured figures docs/measurements/ pastes (harness/report/markdown.py)."""

from __future__ import annotations

import json

from harness.contract.run_options import EngineOptions, RunOptions
from harness.report.markdown import summary


def case(suite: str, outcome: str, greedy_check: dict | None = None) -> dict:
    record = {"nodeid": f"suites/{suite}/test_x.py::test_x", "suite": suite, "outcome": outcome, "message": ""}
    return record | ({"greedy_check": greedy_check} if greedy_check else {})


def run(engine_fixes: list[str], cases: list[dict]) -> dict:
    header = {
        "started": "2026-12-01T07:00:00+00:00",
        "git_commit": "0123456789abcdef",
        "status": "complete",
        "command": "mtp-harness run --decoder vllm-mtp",
        "decoder": "vllm-mtp",
        "model": "/somewhere/tiny-mimo",
        "dtype": "bf16",
        "engine": "vllm 0.32.0 (cpu)",
        "options": RunOptions(decoder="vllm-mtp", engine=EngineOptions(fixes=tuple(engine_fixes))).to_record(),
    }
    return {"run": header, "cases": cases}


def test_judged_counts_the_cases_run_and_not_expected_to_fail_as_shipped_and_beneath(tmp_path):
    shipped = run([], [case("greedy", "passed"), case("greedy", "xfailed"), case("greedy", "skipped")])
    beneath = run(["a-slug", "b-slug"], [case("greedy", "passed"), case("greedy", "failed"), case("greedy", "skipped")])
    paths = []
    for name, results in (("shipped", shipped), ("beneath", beneath)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "results.json").write_text(json.dumps(results))
        paths.append(tmp_path / name)
    rows = [line for line in summary(paths).splitlines() if line.startswith("| vllm-mtp")]
    cells = [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]
    # decoder, model, engine, suite, cases, judged, passed, failed, near-ties, xfailed, expected failures, skipped,
    # not judged, verdict
    assert cells[0][2:6] == ["vllm 0.32.0 (cpu), as shipped", "greedy", "3", "1"]
    assert cells[0][-1] == "ok"
    assert cells[1][2:6] == ["vllm 0.32.0 (cpu), beneath 2 findings' fixes", "greedy", "3", "2"]
    assert cells[1][-1] == "FAILED"


def test_a_suite_of_expected_failures_reads_not_judged_with_its_finding_in_markdown_and_json(tmp_path):
    from harness.report.markdown import judgement_json

    known = {"findings": ["vllm-cpu-expand-kernel"], "explanation": "x"}
    masked = [case("sampling", "xfailed") | {"known": known} for _ in range(3)]
    skipped = case("engine", "skipped") | {"message": "decoder 'vllm-mtp' has no such configuration\nmore"}
    (tmp_path / "results.json").write_text(json.dumps(run([], [*masked, skipped, case("greedy", "passed")])))
    rows = [line for line in summary([tmp_path]).splitlines() if line.startswith("| vllm-mtp")]
    cells = {row.split("|")[4].strip(): [c.strip() for c in row.strip("|").split("|")] for row in rows}
    assert cells["sampling"][4:6] == ["3", "0"] and cells["sampling"][-1] == "NOT JUDGED"
    assert cells["sampling"][10] == "vllm-cpu-expand-kernel 3"
    assert cells["engine"][-2:] == ["1: decoder 'vllm-mtp' has no such configuration", "NOT JUDGED"]
    [document] = json.loads(judgement_json([tmp_path]))
    suites = {record["suite"]: record for record in document["suites"]}
    assert suites["sampling"]["verdict"] == "NOT JUDGED"
    assert suites["sampling"]["expected_failures"] == {"vllm-cpu-expand-kernel": 3}
    assert "--engine-fixes=vllm-cpu-expand-kernel" in suites["sampling"]["beneath"]
    assert "beneath" not in suites["engine"], "no finding masked it: there is nothing to run beneath"
    assert suites["greedy"]["verdict"] == "ok" and suites["greedy"]["judged"] == 1


def test_the_coverage_table_sums_the_positions_the_greedy_checks_compared(tmp_path):
    checks = [
        {"positions": 10, "checked": 10, "near_ties": []},
        {"positions": 10, "checked": 9, "near_ties": [{"index": 3}]},
    ]
    results = run([], [case("greedy", "passed", check) for check in checks] + [case("sampling", "passed")])
    (tmp_path / "results.json").write_text(json.dumps(results))
    text = summary([tmp_path / "results.json"])
    assert "| vllm-mtp | tiny-mimo | bf16 | 2 | 20 | 19 | 95.0% | 1 |" in text


def test_the_engine_suites_checks_are_listed_with_their_configuration_and_the_engines_counters(tmp_path):
    checked = case("engine", "xfailed") | {
        "case": "test_preemption.py::test_preempted_requests_decode_as_the_reference",
        "configuration_evidence": {
            "configuration": "preempt",
            "what": "a small KV cache",
            "evidence": {"preemptions": 6, "prefix_cache_hit_tokens": 0},
            "required": ["preemptions"],
        },
    }
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "results.json").write_text(json.dumps(run([], [checked])))
    [row] = [line for line in summary([tmp_path / "run"]).splitlines() if "| preempt |" in line]
    assert (
        row
        == "| vllm-mtp | tiny-mimo | preempted_requests_decode_as_the_reference | preempt | xfailed | preemptions 6 |"
    )


def test_the_required_counters_read_the_same_in_the_report_and_the_summary_and_a_stalled_one_is_marked():
    from harness.report.engine_evidence import required_counters

    record = {
        "configuration": "preempt",
        "what": "",
        "evidence": {"preemptions": 0, "x": 3},
        "required": ["preemptions"],
    }
    assert required_counters(record) == "preemptions 0"
    assert required_counters(record, mark_missing=True) == "preemptions 0 (required, stayed 0)"
    assert required_counters({**record, "evidence": {"preemptions": 6}}, mark_missing=True) == "preemptions 6"
    assert required_counters({**record, "required": []}) == "none required"
