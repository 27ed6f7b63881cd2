"""Which engine releases each finding watches: measured, never typed. `mtp-harness matrix --record` runs every
finding's standalone reproducer (its folder's reproducer.py) against each release it was given and writes the verdicts
into the finding's folder (versions.json: release -> verdict, with when and at which commit). A finding watches the
release it was found in (every CI runs its reproducer there) and each release where its reproducer said BUG
REPRODUCED; a release where it was measured absent, or where the reproducer could not run, is not watched, so a
failure there is a failure. $MTP_HARNESS_FINDING_VERSIONS names one file of every finding's verdicts (slug -> release
-> verdict) instead: the matrix's own runs read the verdicts it has just measured.

Pure data: no engine, no torch."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path

VARIABLE = "MTP_HARNESS_FINDING_VERSIONS"
FINDING_FILE = "versions.json"  # in a finding's folder
REPRODUCED, NOT_REPRODUCED, COULD_NOT_RUN = "reproduced", "not reproduced", "could not run"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, COULD_NOT_RUN)

Verdicts = dict[str, dict[str, str]]  # finding slug -> engine release -> verdict


def read_verdicts(path: Path) -> Verdicts:
    """The verdicts of a file of every finding's (an absent file: none measured); read once per file and change."""
    if not path.is_file():
        return {}
    return {slug: dict(by_version) for slug, by_version in _read(str(path), path.stat().st_mtime_ns).items()}


def read_measured(slug: str, folder: Path | None) -> dict[str, str]:
    """Finding `slug`'s verdicts by release: the file $MTP_HARNESS_FINDING_VERSIONS names where set, else its folder's
    versions.json (none measured: empty)."""
    override = os.environ.get(VARIABLE)
    if override:
        return read_verdicts(Path(override)).get(slug, {})
    path = folder / FINDING_FILE if folder is not None else None
    if path is None or not path.is_file():
        return {}
    return dict(_read(str(path), path.stat().st_mtime_ns).get(slug, {}))


@functools.cache
def _read(path: str, modified_ns: int) -> Verdicts:
    """slug -> release -> verdict, from a file of every finding's ({"findings": ...}) or of one ({"slug", ...})."""
    record = json.loads(Path(path).read_text())
    findings = {record["slug"]: record["releases"]} if "releases" in record else record.get("findings", {})
    return {slug: {str(v): str(verdict) for v, verdict in by_version.items()} for slug, by_version in findings.items()}


def merged(old: Verdicts, new: Mapping[str, Mapping[str, str]]) -> Verdicts:
    """`old` with every verdict of `new` in its place: a release measured again takes its newest verdict, except that
    a reproducer that could not run leaves an earlier definite verdict standing."""
    result = {slug: dict(by_version) for slug, by_version in old.items()}
    for slug, by_version in new.items():
        kept = result.setdefault(slug, {})
        for version, verdict in by_version.items():
            if verdict != COULD_NOT_RUN or kept.get(version, COULD_NOT_RUN) == COULD_NOT_RUN:
                kept[version] = verdict
    return result


def write_verdicts(verdicts: Verdicts, path: Path, measured_at: str, commit: str | None) -> None:
    for slug, by_version in verdicts.items():
        unknown = set(by_version.values()) - set(VERDICTS)
        if unknown:
            raise ValueError(f"finding {slug}: verdicts {sorted(unknown)} are none of {VERDICTS}")
    record = {"measured_at": measured_at, "commit": commit, "findings": verdicts}
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def write_finding_verdicts(
    folder: Path, slug: str, by_version: Mapping[str, str], measured_at: str, commit: str | None
) -> None:
    """One finding's verdicts into its folder's versions.json."""
    unknown = set(by_version.values()) - set(VERDICTS)
    if unknown:
        raise ValueError(f"finding {slug}: verdicts {sorted(unknown)} are none of {VERDICTS}")
    record = {"slug": slug, "measured_at": measured_at, "commit": commit, "releases": dict(by_version)}
    (folder / FINDING_FILE).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")


def watched_versions(slug: str, found_in: str, by_version: Mapping[str, str]) -> tuple[str, ...]:
    """The releases finding `slug` watches: `found_in` unless measured absent there, and every release its reproducer
    reproduced the bug on (`by_version`: its verdicts)."""
    watched = {version for version, verdict in by_version.items() if verdict == REPRODUCED}
    if by_version.get(found_in) != NOT_REPRODUCED:  # a reproducer that could not run there proves nothing
        watched.add(found_in)
    return tuple(sorted(watched, key=release_key))


def release_key(version: str) -> tuple:
    """Releases in order (0.9.0 before 0.10.0; 2026.9.11063 before 2026.10.11549)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in version.split("."))
