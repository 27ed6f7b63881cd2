"""The HTML report of one run: a pure rendering of the results dict (schema 1) into one self-contained page.

No scripts, no external resources, nothing that depends on when it was rendered: the same results give the
same bytes. Token text is untrusted (tokens can contain markup): it reaches the page only through jinja's
autoescape or pandas' `to_html(escape=True)`; only that pandas output and the SVG charts (which escape their
own labels) are marked safe.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shlex
import tempfile
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pandas as pd
from markupsafe import Markup

from harness.contract.records import (
    SCHEMA,
    AcceptanceRecord,
    CaseRecord,
    GroupRecord,
    KnownGroupRecord,
    Results,
    TokenRecord,
)
from harness.report import charts
from harness.report.coverage import greedy_coverage
from harness.report.engine_evidence import required_counters
from harness.report.judgement import NOT_JUDGED, TOO_FEW, beneath_command, judge_run
from harness.report.page_templates import templates
from harness.report.timeline import timeline_svg

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "near-tie")
FAILING = frozenset({"failed", "error"})
TOKEN_WINDOW = 12  # tokens shown either side of the first divergent index
CHART_CELLS = 12  # law charts show the cells with the largest expected counts
TEST_ORDER = ("chi-square", "G", "KS", "binned chi-square", "log-likelihood")
VISIBLE_WHITESPACE = {" ": "␣", "\n": "↵", "\t": "⇥", "\r": "␍"}
MISSING = "—"


def render_report(results: Results) -> str:
    """The report page for a results dict (schema 1), as one self-contained HTML string."""
    return templates().get_template("report.html.j2").render(**_page(results))


def write_report(results: Results, run_dir: Path) -> Path:
    """Write run_dir/results.json and run_dir/index.html, each atomically; returns the index.html path."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    page = render_report(results)
    _write_atomically(run_dir / "results.json", json.dumps(results, indent=2, sort_keys=False) + "\n")
    index = run_dir / "index.html"
    _write_atomically(index, page)
    return index


def write_results_json(results: Results, run_dir: Path) -> Path:
    """Write run_dir/results.json alone, atomically (the partial record of a run still going)."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "results.json"
    _write_atomically(path, json.dumps(results, indent=2, sort_keys=False) + "\n")
    return path


def _write_atomically(path: Path, text: str) -> None:
    """Write to a temporary file in the same directory, then os.replace it onto `path` (readers never see
    a half-written file; an interrupted write leaves the previous file in place and no temporary file)."""
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temporary, 0o644)  # mkstemp creates 0600; a report is for reading
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


# ---- formatting -----------------------------------------------------------------------------------------


def visible(text: str) -> str:
    """Token text with whitespace made visible (space ␣, newline ↵, tab ⇥) and other control characters as
    escapes, so that a token that is only whitespace still shows. Not HTML-escaped: the caller escapes."""
    if text == "":
        return "∅"
    shown = []
    for char in text:
        if char in VISIBLE_WHITESPACE:
            shown.append(VISIBLE_WHITESPACE[char])
        elif not char.isprintable():
            shown.append(repr(char)[1:-1])
        else:
            shown.append(char)
    return "".join(shown)


def _g(value: float | None, digits: int = 3) -> str:
    return MISSING if value is None else f"{value:.{digits}g}"


def _table(rows: list[dict[str, Any]], columns: list[str], css_class: str) -> Markup:
    """A pandas HTML table of pre-formatted cells; pandas escapes every cell (escape=True)."""
    frame = pd.DataFrame(rows, columns=columns).astype(object).fillna(MISSING).astype(str)
    return Markup(frame.to_html(escape=True, index=False, classes=css_class, border=0))


def _sorted_cases(cases: Iterable[dict]) -> list[dict]:
    """Failures first, then by suite, then by node id."""
    return sorted(cases, key=lambda case: (case["outcome"] not in FAILING, case["suite"], case["nodeid"]))


# ---- page sections ----------------------------------------------------------------------------------------


def _page(results: Results) -> dict[str, Any]:
    if results.get("schema") != SCHEMA:
        raise ValueError(f"results schema {results.get('schema')!r} is not supported (expected {SCHEMA})")
    run = results["run"]
    cases = [{**case, "anchor": f"case-{i}"} for i, case in enumerate(_sorted_cases(results["cases"]))]
    return {
        "title": f"mtp-harness report {run['run_id']}",
        "run": run,
        "banner": _banner(run, cases),
        "verdict": _verdict(run, cases),
        "summary_by_suite": _summary(cases, "suite", run),
        "summary_by_decoder": _summary(cases, "decoder", run),
        "not_judged": [j for j in judge_run(cases, run) if j.verdict in (NOT_JUDGED, TOO_FEW)],
        "totals": Counter(case["outcome"] for case in cases),
        "failures": [case for case in cases if case["outcome"] in FAILING],
        "groups": [_group_view(group) for group in results["groups"]],
        "known": _known_section(results.get("known") or [], cases),
        "divergences": [_divergence_view(case) for case in cases if case.get("divergence")],
        "coverage": _greedy_coverage(cases),
        "sampling": _sampling_section(cases),
        "invariants": _invariants_section(cases),
        "engine_configs": _configuration_evidence_section(cases),
        "features": _features_section(cases),
        "acceptance": _acceptance_section(results.get("acceptance")),
        "mutants": _mutants_section(results.get("mutants")),
        "false_alarms": results.get("false_alarms"),
        "all_cases": _all_cases_table(cases),
        "outcomes": OUTCOMES,
    }


def _known_section(known: list[KnownGroupRecord], cases: list[dict]) -> list[dict[str, Any]]:
    """Each finding's expected failures with their evidence (message, records), in the run's case order."""
    by_id = {case["nodeid"]: case for case in cases}
    return [{**group, "members": [by_id[nodeid] for nodeid in group["cases"] if nodeid in by_id]} for group in known]


def _group_view(group: GroupRecord) -> dict[str, Any]:
    """A failure group with its minimal case's request in words and its token timeline."""
    minimal = group.get("minimal") or {}
    if not minimal.get("reproduced"):
        return {**group, "minimal_text": None, "timeline": None}
    case = minimal["minimal"]
    forced = minimal["forced_drafts"]
    text = (
        f"batch of 1, k = {case['num_draft_tokens']}, {len(forced)} forced draft(s)"
        + (f" at {', '.join(sorted(forced, key=int))}" if forced else "")
        + f", {case['max_new_tokens']} new token(s), a {len(case['prompt_ids'])}-token prompt"
        + (f", temperature {case['temperature']}" if case.get("temperature") else "")
        + "; "
        + (
            f"{minimal['violations']} invariant violation(s), the first: {minimal['violation']}"
            if minimal.get("kind") == "invariants"
            else f"first divergence at index {minimal['divergence_index']}"
        )
        + f". Shrunk in {minimal['steps']} steps ({minimal['tried']} variants tried, "
        f"{minimal['elapsed_s']} s{'' if minimal['finished'] else ', stopped by the time budget'})."
    )
    if minimal.get("same_as_group"):
        text += (
            f" The same cause as group {minimal['same_as_group']} (the same failure in words, or the same minimal "
            "case), seen by another test."
        )
    timeline = timeline_svg(
        minimal["reference_tokens"], minimal["actual_tokens"], minimal["passes"], forced, minimal["divergence_index"]
    )
    return {**group, "minimal_text": text, "timeline": Markup(timeline)}


def _banner(run: dict, cases: list[dict]) -> str | None:
    if run["status"] == "complete":
        return None
    return f"partial report: run {run['status']}, {len(cases)} cases recorded"


def _verdict(run: dict, cases: list[dict]) -> str:
    if any(case["outcome"] in FAILING for case in cases):
        return "FAILED"
    if run["status"] != "complete":
        return "INCOMPLETE"
    if any(j.falls_short for j in judge_run(cases, run)):
        return "NOT JUDGED"  # silence is never success
    return "PASSED" if cases else "NO CASES"


def _summary(cases: list[dict], key: str, run: dict) -> Markup | None:
    """What the run judged per suite (or decoder), harness/report/judgement.py: FAILED first, then NOT JUDGED (a
    suite whose cases were all expected failures or skips: silence, never ok), then ok; the expected failures by
    finding and the skips by reason beside, and for a NOT JUDGED suite the command that runs it beneath its
    masking findings' fixes."""
    if not cases:
        return None
    rows = []
    for j in judge_run(cases, run, key):
        beneath = beneath_command(j, run) if key == "suite" else None
        known = "; ".join(f"{slug}: {count}" for slug, count in j.expected_failures.items())
        skipped = "; ".join(f"{count}: {reason}" for reason, count in j.not_judged.items())
        rows.append(
            {
                key: j.suite,
                "cases": j.cases,
                "judged": j.judged,
                "passed": j.passed,
                "failed": j.failed,
                "near-ties": j.near_ties,
                "expected failures (finding: cases)": known,
                "not judged (skipped: reason)": skipped,
                "verdict": j.verdict,
                "beneath the findings' fixes": shlex.join(beneath) if beneath else "",
            }
        )
    return _table(rows, list(rows[0]), f"summary summary-{key}")


def _all_cases_table(cases: list[dict]) -> Markup | None:
    if not cases:
        return None
    rows = [
        {
            "outcome": case["outcome"],
            "suite": case["suite"],
            "case": case["case"],
            "decoder": case["decoder"],
            "model": case["model"],
            "params": ", ".join(f"{k}={v}" for k, v in case["params"].items()),
            "duration (s)": f"{case['duration_s']:.2f}",
            "message": case["message"].splitlines()[0] if case["message"] else "",
            "node id": case["nodeid"],
        }
        for case in cases
    ]
    columns = ["outcome", "suite", "case", "decoder", "model", "params", "duration (s)", "message", "node id"]
    return _table(rows, columns, "cases")


# ---- greedy divergences -----------------------------------------------------------------------------------


def _greedy_coverage(cases: list[CaseRecord]) -> dict[str, Any] | None:
    """The report's coverage line: how many output positions the greedy checks compared with a reference."""
    coverage = greedy_coverage(cases)
    if coverage is None:
        return None
    share = MISSING if coverage.share is None else f"{coverage.share:.1%}"
    return {**dataclasses.asdict(coverage), "share": share}


def _divergence_view(case: CaseRecord) -> dict[str, Any]:
    divergence = case["divergence"]
    index = divergence["index"]
    return {
        "case": case,
        "anchor": case["anchor"],
        "d": divergence,
        "classification": "numerical near-tie" if divergence["near_tie"] else "DIVERGENCE",
        "margin": _g(divergence["margin"]),
        "gap": _g(divergence.get("token_gap")),
        "token_window": _token_window(divergence["reference_tokens"], divergence["actual_tokens"], index),
        "context": visible(divergence["context_text"]),
        "expected": visible(divergence["expected_text"]),
        "actual": visible(divergence["actual_text"]),
        "top5": _top5_table(divergence),
        "forced_drafts": _forced_drafts_table(divergence["forced_drafts"]),
        "steps": _steps_table(divergence["steps"]),
    }


def _token_window(reference: list[TokenRecord], actual: list[TokenRecord], index: int) -> dict[str, Any]:
    """Reference and MTP tokens aligned by generated index, TOKEN_WINDOW either side of the divergence."""
    length = max(len(reference), len(actual))
    start, stop = max(0, index - TOKEN_WINDOW), min(length, index + TOKEN_WINDOW + 1)

    def cells(tokens: list[dict]) -> list[dict[str, Any]]:
        row = []
        for i in range(start, stop):
            token = tokens[i] if i < len(tokens) else None
            state = "diverge" if i == index else ("after" if i > index else "same")
            text = MISSING if token is None else visible(token["text"])
            row.append({"text": text, "id": "" if token is None else token["id"], "state": state})
        return row

    return {
        "indices": list(range(start, stop)),
        "index": index,
        "reference": cells(reference),
        "actual": cells(actual),
        "elided_before": start,
        "elided_after": length - stop,
    }


def _top5_table(divergence: dict) -> Markup | None:
    if not divergence["top5"]:
        return None
    rows = []
    for rank, entry in enumerate(divergence["top5"], start=1):
        roles = []
        if entry["id"] == divergence["expected_token"]:
            roles.append("reference")
        if entry["id"] == divergence["actual_token"]:
            roles.append("MTP")
        token = visible(entry["text"])
        rows.append(
            {
                "rank": rank,
                "id": entry["id"],
                "token": token,
                "p": _g(entry["probability"], 4),
                "chosen by": " ".join(roles),
            }
        )
    return _table(rows, ["rank", "id", "token", "p", "chosen by"], "top5")


def _forced_drafts_table(forced: dict[str, int]) -> Markup | None:
    if not forced:
        return None
    rows = [
        {"position": position, "forced draft token": token}
        for position, token in sorted(forced.items(), key=lambda kv: int(kv[0]))
    ]
    return _table(rows, ["position", "forced draft token"], "forced")


def _steps_table(steps: list[dict]) -> Markup | None:
    if not steps:
        return None
    rows = [
        {
            "pass": number,
            "start": step["start"],
            "drafts": " ".join(map(str, step["drafts"])),
            "accepted": step["accepted"],
            "emitted": " ".join(map(str, step["emitted"])),
        }
        for number, step in enumerate(steps)
    ]
    return _table(rows, ["pass", "start", "drafts", "accepted", "emitted"], "steps")


# ---- sampling -------------------------------------------------------------------------------------------


def _sampling_section(cases: list[CaseRecord]) -> dict[str, Any] | None:
    sampled = [case for case in cases if case.get("sampling")]
    if not sampled:
        return None
    return {
        "table": _sampling_table(sampled),
        "charts": [_sampling_chart(case) for case in sampled],
        "family_alpha": sampled[0]["sampling"]["family_alpha"],
    }


def _sampling_table(cases: list[dict]) -> Markup:
    present = {p["test"] for case in cases for p in case["sampling"]["p_values"]}
    tests = [t for t in TEST_ORDER if t in present] + sorted(present - set(TEST_ORDER))
    rows = []
    for case in cases:
        s = case["sampling"]
        row = {
            "case": case["case"],
            "kind": s["kind"],
            "N": s["n"],
            "cells": s["cells"] if s["cells"] is not None else MISSING,
        }
        p_by_test = {p["test"]: p for p in s["p_values"]}
        for test in tests:
            row[f"{test} p"] = _g(p_by_test[test]["raw"]) if test in p_by_test else MISSING
            row[f"{test} p Holm"] = _g(p_by_test[test]["holm"]) if test in p_by_test else MISSING
        row |= {"KL": _g(s["kl"]), "TV": _g(s["tv"]), "min detectable TV": _g(s["detectable_tv"])}
        row["verdict"] = "REJECTED" if s["rejected"] else "consistent"
        rows.append(row)
    p_columns = [f"{test} p{suffix}" for test in tests for suffix in ("", " Holm")]
    return _table(
        rows, ["case", "kind", "N", "cells", *p_columns, "KL", "TV", "min detectable TV", "verdict"], "sampling"
    )


def _sampling_chart(case: CaseRecord) -> dict[str, Any]:
    s = case["sampling"]
    view = {"case": case, "anchor": case["anchor"], "rejected": s["rejected"], "svg": None, "note": ""}
    view |= {"positions_svg": None, "positions_note": ""}
    if s["kind"] == "law" and s["cells_table"]:
        cells = sorted(s["cells_table"], key=lambda c: (-c["expected"], c["label"]))[:CHART_CELLS]
        title = f"{s['case_id']}: observed vs expected counts"
        labels = [visible(c["label"]) for c in cells]
        view["svg"] = Markup(
            charts.observed_vs_expected(
                labels, [c["observed"] for c in cells], [c["expected"] for c in cells], title=title
            )
        )
        view["note"] = f"{len(cells)} largest of {len(s['cells_table'])} pooled cells by expected count, N = {s['n']}"
    if s["kind"] == "pit" and s.get("positions"):
        view["positions_svg"] = Markup(_positions_chart(s))
        view["positions_note"] = (
            "-log10 of the smaller Holm-adjusted p-value (KS of u, log-likelihood Z) at each output position; "
            f"bars above the line reject at family-wise alpha {s['family_alpha']:g}. "
            f"{s.get('truncated_runs', 0)} sequences end in an accepted run cut by max_new_tokens."
        )
    if s["kind"] == "pit" and s["pit_histogram"]:
        bins = len(s["pit_histogram"])
        labels = [f"{i / bins:.2f}" for i in range(bins)]
        expected = sum(s["pit_histogram"]) / bins
        title = f"{s['case_id']}: randomized PIT histogram"
        view["svg"] = Markup(
            charts.histogram(
                s["pit_histogram"], title=title, bin_labels=labels, expected=expected, expected_label="uniform"
            )
        )
        view["note"] = f"{bins} bins over [0, 1]; the dashed line is the uniform expectation N / {bins}"
    return view


def _positions_chart(s: dict) -> str:
    """One bar per output position of a PIT case: -log10 of its smaller Holm-adjusted p-value."""
    import math

    def height(p: float) -> float:
        return -math.log10(max(p, 1e-300))

    positions = s["positions"]
    labels = [f"{at['position']}{' ' + at['what'] if at['what'] else ''}" for at in positions]
    values = [height(min(at["ks_holm"], at["z_holm"])) for at in positions]
    title = f"{s['case_id']}: per-position evidence against the target law"
    return charts.histogram(
        values, title=title, bin_labels=labels, expected=height(s["family_alpha"]), expected_label="reject above"
    )


# ---- invariants, acceptance, mutants ---------------------------------------------------------------------


def _invariants_section(cases: list[CaseRecord]) -> dict[str, Any] | None:
    checked = [case for case in cases if case.get("invariants")]
    if not checked:
        return None
    rows = [
        {
            "case": case["case"],
            "request": v["request"],
            "pass": v["pass"],
            "invariant": v["invariant"],
            "where": v["where"],
            "largest difference": _g(v["difference"]),
            "at": v["at"],
            "detail": v["detail"],
        }
        for case in checked
        for v in case["invariants"]["violations"]
    ]
    columns = ["case", "request", "pass", "invariant", "where", "largest difference", "at", "detail"]
    return {
        "cases": len(checked),
        "passes": sum(case["invariants"]["passes"] for case in checked),
        "recurrent_checks": sum(case["invariants"].get("recurrent_checks", 0) for case in checked),
        "violations": len(rows),
        "table": _table(rows, columns, "violations") if rows else None,
    }


def _configuration_evidence_section(cases: list[CaseRecord]) -> Markup | None:
    """The engine suite's checks: each one's deployed configuration and the engine's own counters that show it
    happened (a counter it requires and that stayed 0 is marked)."""
    rows = []
    for case in cases:
        record = case.get("configuration_evidence")
        if not record:
            continue
        counters = record["evidence"]
        others = ", ".join(f"{k} {v}" for k, v in sorted(counters.items()) if k not in record["required"] and v)
        rows.append(
            {
                "case": case["case"],
                "outcome": case["outcome"],
                "configuration": record["configuration"],
                "evidence (required counters)": required_counters(record, mark_missing=True),
                "other counters": others,
                "what it is": record["what"],
                "not judged": "; ".join(f"{', '.join(u['checks'])}: {u['why']}" for u in [case.get("unjudged")] if u),
            }
        )
    columns = ["case", "outcome", "configuration", "evidence (required counters)", "other counters", "what it is"]
    if any(row["not judged"] for row in rows):
        columns.append("not judged")
    return _table(rows, columns, "engine-configs") if rows else None


def _features_section(cases: list[CaseRecord]) -> Markup | None:
    """The features suite's failed and expected-failed cases: the request's features, where the output parted from
    target-only decoding (or which logprobs were wrong), and the pass it happened in."""
    rows = []
    for case in cases:
        if case.get("feature_output"):
            rows.append(
                {"case": case["case"], "outcome": case["outcome"], **_feature_output_cells(case["feature_output"])}
            )
        if case.get("logprobs"):
            rows.append({"case": case["case"], "outcome": case["outcome"], **_logprobs_cells(case["logprobs"])})
    columns = ["case", "outcome", "request", "what went wrong", "pass there"]
    return _table(rows, columns, "features") if rows else None


def _feature_output_cells(output: dict) -> dict[str, str]:
    expected, actual = output["expected"], output["actual"]
    differing = (i for i, (a, b) in enumerate(zip(expected, actual, strict=False)) if a != b)
    index = next(differing, min(len(expected), len(actual)))
    at = f"{expected[index] if index < len(expected) else 'the end'}"
    got = f"{actual[index] if index < len(actual) else 'the end'}"
    where = next((s for s in output["steps"] if s["start"] <= index < s["start"] + len(s["emitted"])), None)
    return {
        "request": f"{output['settings']}; min_tokens {output['min_tokens']}; EOS ids {output['eos_token_ids']}"
        + (f"; constrained to {output['constraint']}" if output.get("constraint") else ""),
        "what went wrong": f"output parts at {index}: expected {at}, got {got} (finish {output['finish_reason']}, "
        f"expected {output['expected_finish_reason']})",
        "pass there": "" if where is None else _pass_in_words(where),
    }


def _pass_in_words(step: dict) -> str:
    return f"start {step['start']}, drafts {step['drafts']}, accepted {step['accepted']}, emitted {step['emitted']}"


def _logprobs_cells(logprobs: dict) -> dict[str, str]:
    first = logprobs["mismatches"][0]
    return {
        "request": f"logprobs, seed {logprobs['seed']}",
        "what went wrong": f"{len(logprobs['mismatches'])} of {logprobs['positions']} positions; first: position "
        f"{first['position']} ({first['kind']}): {first['what']}",
        "pass there": "a pass with drafts" if first["drafted_pass"] else "a pass without drafts",
    }


def _acceptance_section(acceptance: AcceptanceRecord | None) -> dict[str, Any] | None:
    if acceptance is None:
        return None
    k = acceptance["k"]
    labels = [str(i) for i in range(len(acceptance["accepted_histogram"]))]
    title = f"passes by number of drafts accepted (k = {k}, {acceptance['passes']} passes)"
    depth_rows = [
        {"depth": d, "acceptance rate": f"{rate:.3f}"}
        for d, rate in enumerate(acceptance["per_depth_acceptance"], start=1)
    ]
    fidelity_rows = [
        {"depth": f["depth"], "KL(p‖q)": _g(f["kl"]), "TV(p, q)": _g(f["tv"]), "positions": f["positions"]}
        for f in acceptance["head_fidelity"]
    ]
    cost = acceptance["head_cost_vs_verify"]
    return {
        "a": acceptance,
        "histogram": Markup(charts.histogram(acceptance["accepted_histogram"], title=title, bin_labels=labels)),
        "per_depth": _table(depth_rows, ["depth", "acceptance rate"], "per-depth") if depth_rows else None,
        "fidelity": _table(fidelity_rows, ["depth", "KL(p‖q)", "TV(p, q)", "positions"], "fidelity")
        if fidelity_rows
        else None,
        "tokens_per_pass": f"{acceptance['tokens_per_pass']:.3f}",
        "head_cost": MISSING if cost is None else f"{cost:.3g}×",
    }


def _mutants_section(mutants: dict | None) -> dict[str, Any] | None:
    """The mutant x suite table; the score counts the mutants meant to be caught (controls must pass)."""
    if mutants is None:
        return None
    suites = mutants["suites"]
    rows = [
        {
            "mutant": row["mutant"],
            "models": row["models"],
            **row["cells"],
            "expected": row.get("expected", "caught"),
            "as expected": "yes" if row.get("as_expected", row["caught"]) else "NO",
        }
        for row in mutants["rows"]
    ]
    correct = {"mutant": "correct decoder", "models": "(no bug: must pass)", **mutants["correct_decoder"]}
    rows.append({**correct, "expected": "passes", "as expected": "yes" if mutants["correct_passes"] else "NO"})
    scored = [row for row in mutants["rows"] if row.get("expected", "caught") == "caught"]
    return {
        "m": mutants,
        "table": _table(rows, ["mutant", "models", *suites, "expected", "as expected"], "mutants"),
        "score": f"{mutants['score']:.0%}",
        "caught": sum(row["caught"] for row in scored),
        "total": len(scored),
        "controls": len(mutants["rows"]) - len(scored),
        "mode": mutants.get("mode", "full table"),
        "efficiency": _efficiency_table(mutants["efficiency"]) if mutants["efficiency"] else None,
    }


def _efficiency_table(efficiency: list[dict]) -> Markup:
    def number(e: dict, key: str) -> object:
        return MISSING if e.get(key) is None else e[key]

    rows = [
        {
            "mutant": e["mutant"],
            "case": e["case"],
            "first rejection N": number(e, "first_rejection_n"),
            "ideal LR N": number(e, "ideal_lr_n"),
            "ideal chi-square N": number(e, "ideal_chi2_n"),
            "ratio": _g(e.get("ratio")),
            "TV": _g(e.get("tv")),
            "KL": _g(e.get("kl")),
            "error": e.get("error", ""),
        }
        for e in efficiency
    ]
    columns = ["mutant", "case", "first rejection N", "ideal LR N", "ideal chi-square N", "ratio", "TV", "KL"]
    if any(row["error"] for row in rows):
        columns.append("error")
    return _table(rows, columns, "efficiency")
