"""The findings-by-versions matrix (`mtp-harness matrix`) as data and as a page: engine releases as columns, every
finding as a row (its reproducer's verdict beside the suites' expected failures of it), and per release the cases
judged, failed and expected, and each failure no finding explains, as a new failure with its group and reproducer.

Pure data in, data or HTML out (jinja2 with autoescape: every text from a run is escaped); the command that measures
it is harness/commands/matrix.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.report.page_templates import templates
from harness.subjects.engines.finding_versions import COULD_NOT_RUN, NOT_REPRODUCED, REPRODUCED
from harness.subjects.engines.findings import Finding, suite_relative

SCHEMA = 1


@dataclass(frozen=True)
class FindingCell:
    """One finding on one release: what its reproducer said and what the suites explained as it."""

    reproducer: str | None  # REPRODUCED, NOT_REPRODUCED, COULD_NOT_RUN; None: not run (no clone, no reproducer)
    watched: bool  # the run's findings watched this release (the reproducer's verdict decides)
    expected_failures: int  # the run's cases this finding's signature explained
    reaches: bool  # cases the finding watches ran (were not skipped) in the suites' run
    ran: bool  # the suites ran on this release

    @property
    def agrees(self) -> bool | None:
        """Does the suites' verdict agree with the reproducer's? Reproduced: the suites explained a case of it, or
        none of its tests ran here. Not reproduced: the suites explained none. None: nothing to compare."""
        if self.reproducer in (None, COULD_NOT_RUN) or not self.ran:
            return None
        if self.reproducer == REPRODUCED:
            return self.expected_failures > 0 or not self.reaches  # none of its watched cases ran: nothing to see
        return self.expected_failures == 0

    def to_record(self) -> dict[str, Any]:
        return {
            "reproducer": self.reproducer,
            "watched": self.watched,
            "expected_failures": self.expected_failures,
            "reaches": self.reaches,
            "agrees": self.agrees,
        }


def watched_cases_run(findings: Sequence[Finding], model: str, cases: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Per finding, the cases of a run it watches on `model` that ran (not skipped): where its bug could show. A
    finding whose watched tests all skipped (llama.cpp's wheel cannot force drafts) could not be seen by the suites."""
    ran = [suite_relative(case["nodeid"]) for case in cases if case["outcome"] != "skipped"]
    return {finding.slug: sum(1 for test_id in ran if finding.fails(model, test_id)) for finding in findings}


def expected_failures_of(suites: Sequence[Mapping[str, Any]], slug: str) -> int:
    """The cases a run's judgement (judgement_records) counts as expected failures of `slug`, over its suites."""
    return sum(int(suite.get("expected_failures", {}).get(slug, 0)) for suite in suites)


def finding_rows(
    findings: Sequence[Finding], columns: Sequence[Mapping[str, Any]], watched: Mapping[str, Sequence[str]]
) -> list[dict[str, Any]]:
    """A row per finding: slug, title, found_in and a cell per release column (versions.json's `versions`, each run
    with its `watched_run`); `watched`: slug -> the releases the run's findings watched."""
    rows = []
    for finding in findings:
        cells = {}
        for column in columns:
            run = column.get("run") or {}
            verdict = (column.get("reproducers") or {}).get(finding.slug, {}).get("verdict")
            cell = FindingCell(
                reproducer=verdict,
                watched=column["version"] in watched.get(finding.slug, ()),
                expected_failures=expected_failures_of(run.get("suites") or [], finding.slug),
                reaches=run.get("watched_run", {}).get(finding.slug, 0) > 0,
                ran=bool(run.get("suites")),
            )
            cells[column["version"]] = cell.to_record()
        rows.append({"slug": finding.slug, "title": finding.title, "found_in": finding.found_in, "cells": cells})
    return rows


def column_totals(suites: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """A release's counts over its run's suites: cases, judged, passed, failed, expected failures, not judged."""
    keys = ("cases", "judged", "passed", "failed", "xfailed")
    totals = {key: sum(int(suite.get(key, 0)) for suite in suites) for key in keys}
    totals["not_judged"] = sum(sum(suite.get("not_judged", {}).values()) for suite in suites)
    return totals


def new_failures(groups: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A run's failure groups (failures no finding explains), as the matrix shows them."""
    keys = ("group", "suite", "signature", "cause", "count", "smallest", "rerun", "reproducer_command")
    return [{key: group.get(key) for key in keys} for group in groups]


def disagreements(rows: Sequence[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(slug, release) of every cell where the suites' verdict contradicts the reproducer's."""
    return [(row["slug"], version) for row in rows for version, cell in row["cells"].items() if cell["agrees"] is False]


def render_versions_page(matrix: Mapping[str, Any]) -> str:
    """The matrix's HTML page (versions.json's content)."""
    labels = {
        REPRODUCED: "reproduced",
        NOT_REPRODUCED: "not reproduced",
        COULD_NOT_RUN: "could not run",
        None: "not run (not shown on this runner or flavour, or no clone)",
    }
    return templates().get_template("versions.html.j2").render(matrix=matrix, labels=labels)


def _run_cell(run: Mapping[str, Any] | None) -> str:
    if not run:
        return "not run"
    stopped = run.get("stopped_after_failures")
    return f"{run['seconds']} s" + (f", stopped after {stopped} failures no finding explains" if stopped else "")


def versions_markdown(matrix: Mapping[str, Any]) -> str:
    """The matrix as markdown tables (what docs/measurements/versions.md pastes): a column per release; the counts,
    then a row per finding with its reproducer's verdict / the suites' expected failures of it."""
    columns = matrix["versions"]
    head = "| | " + " | ".join(column["version"] for column in columns) + " |"
    rule = "|---|" + "---|" * len(columns)
    lines = [head, rule]
    size = [f"{(column.get('install') or {}).get('size_bytes', 0) / 2**30:.2f} GiB" for column in columns]
    lines.append("| environment | " + " | ".join(size) + " |")
    lines.append("| MTP | " + " | ".join(column.get("mtp_problem") or "yes" for column in columns) + " |")
    for key, label in (
        ("cases", "cases"),
        ("judged", "judged"),
        ("passed", "passed"),
        ("failed", "failed"),
        ("xfailed", "expected failures"),
        ("not_judged", "not judged"),
    ):
        cells = [str((column.get("totals") or {}).get(key, "—")) for column in columns]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    new = [str(len((column.get("run") or {}).get("new_failures") or [])) for column in columns]
    lines.append("| new failure groups | " + " | ".join(new) + " |")
    seconds = [_run_cell(column.get("run")) for column in columns]
    lines.append("| suites' run | " + " | ".join(seconds) + " |")
    if not matrix["findings"]:  # an engine without findings (transformers): every failure is a new one
        return "\n".join([*lines, "", "No finding is recorded for this engine: every failure is a new failure."]) + "\n"
    lines += ["", head.replace("| |", "| finding (reproducer / suites' expected failures) |", 1), rule]
    for row in matrix["findings"]:
        cells = []
        for column in columns:
            cell = row["cells"][column["version"]]
            suites = str(cell["expected_failures"]) if cell["watched"] else "not watched"
            mark = " **disagree**" if cell["agrees"] is False else ""
            cells.append(f"{cell['reproducer'] or 'not run'} / {suites}{mark}")
        lines.append(f"| `{row['slug']}` | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
