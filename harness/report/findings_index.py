"""The findings' tables, written from their records and folders (harness/subjects/engines/<engine>/findings/): the
index page's (docs/findings/index.md: each finding's write-up title, engine, the releases its reproducer was measured
on, the model runners it was shown on, its upstream status from its write-up) and the README's short one."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from harness.subjects.engines.finding_versions import COULD_NOT_RUN, NOT_REPRODUCED, REPRODUCED, release_key
from harness.subjects.engines.finding_versions import read_measured as measured_releases
from harness.subjects.engines.findings import Finding


def write_up_title(write_up: Path) -> str:
    """The write-up's heading (its first line, `# ...`)."""
    return write_up.read_text().split("\n", 1)[0].removeprefix("# ").strip()


def write_up_field(write_up: Path, name: str) -> str:
    """A row of the write-up's header table (`| upstream | ... |`), up to its first `;`; empty where it has none."""
    match = re.search(rf"^\| {re.escape(name)} \| (.*) \|$", write_up.read_text(), re.MULTILINE)
    return match.group(1).split("; ", 1)[0] if match else ""


def releases(finding: Finding, verdict: str) -> str:
    """The releases its reproducer gave `verdict` on, oldest first; "not measured" before the matrix ran it."""
    by_release = measured_releases(finding.slug, finding.folder)
    if not by_release:
        return "not measured"
    return ", ".join(sorted((r for r, v in by_release.items() if v == verdict), key=release_key)) or "none"


def findings_table(findings: Sequence[Finding], root: Path) -> str:
    """The index page's table: one row per finding, its write-up linked beside the page."""
    columns = ("finding", "engine, found in", "reproduced on", "measured without it", "could not run", "model runners")
    lines = ["| " + " | ".join((*columns, "upstream")) + " |", "|---" * (len(columns) + 1) + "|"]
    for finding in findings:
        write_up = root / finding.document
        runners = ", ".join(finding.runners) or "(one)"
        lines.append(
            f"| [{write_up_title(write_up)}]({Path(finding.document).name}) | {finding.engine} {finding.found_in} "
            f"| {releases(finding, REPRODUCED)} | {releases(finding, NOT_REPRODUCED)} "
            f"| {releases(finding, COULD_NOT_RUN)} | {runners} | {write_up_field(write_up, 'upstream')} |"
        )
    return "\n".join(lines) + "\n"


def readme_table(findings: Sequence[Finding], root: Path) -> str:
    """The README's short table: each finding's write-up title, linked, and its engine."""
    lines = ["| finding | engine |", "|---|---|"]
    lines += [f"| [{write_up_title(root / f.document)}]({f.document}) | {f.engine} |" for f in findings]
    return "\n".join(lines) + "\n"
