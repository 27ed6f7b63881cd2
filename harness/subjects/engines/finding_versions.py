"""Which engine releases each finding watches: measured, never typed. `mtp-harness matrix --record` runs every
finding's standalone reproducer (docs/findings/<slug>.py) against each release it was given and writes the verdicts
here (finding_versions.json: slug -> release -> verdict, with when and at which commit). A finding watches the
release it was found in (every CI runs its reproducer there) and each release where its reproducer said BUG
REPRODUCED; a release where it was measured absent, or where the reproducer could not run, is not watched, so a
failure there is a failure. $MTP_HARNESS_FINDING_VERSIONS names another file: the matrix's own runs read the verdicts
it has just measured.

Pure data: no engine, no torch."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Mapping
from pathlib import Path

MEASURED = Path(__file__).with_name("finding_versions.json")
VARIABLE = "MTP_HARNESS_FINDING_VERSIONS"
REPRODUCED, NOT_REPRODUCED, COULD_NOT_RUN = "reproduced", "not reproduced", "could not run"
VERDICTS = (REPRODUCED, NOT_REPRODUCED, COULD_NOT_RUN)

Verdicts = dict[str, dict[str, str]]  # finding slug -> engine release -> verdict


def measured_path() -> Path:
    return Path(os.environ.get(VARIABLE) or MEASURED)


def read_verdicts(path: Path | None = None) -> Verdicts:
    """The recorded verdicts (an absent file: none measured); read once per file and change of it."""
    path = path or measured_path()
    if not path.is_file():
        return {}
    return {slug: dict(by_version) for slug, by_version in _read(str(path), path.stat().st_mtime_ns).items()}


@functools.cache
def _read(path: str, modified_ns: int) -> Verdicts:
    findings = json.loads(Path(path).read_text()).get("findings", {})
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


def watched_versions(slug: str, found_in: str, verdicts: Verdicts | None = None) -> tuple[str, ...]:
    """The releases finding `slug` watches: `found_in` unless measured absent there, and every release its reproducer
    reproduced the bug on."""
    by_version = (read_verdicts() if verdicts is None else verdicts).get(slug, {})
    watched = {version for version, verdict in by_version.items() if verdict == REPRODUCED}
    if by_version.get(found_in) != NOT_REPRODUCED:  # a reproducer that could not run there proves nothing
        watched.add(found_in)
    return tuple(sorted(watched, key=release_key))


def release_key(version: str) -> tuple:
    """Releases in order (0.9.0 before 0.10.0; 2026.9.11063 before 2026.10.11549)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in version.split("."))
