"""Bugs the harness found in other people's engines: the tests each one makes fail, and what its failure looks
like.

Each finding is written up in docs/findings/<slug>.md (version, the harness's evidence, root cause with file and
line, a standalone reproducer, the fix). While the engine version it was found in is the one under test, the
plugin (harness/plugin/known.py) watches the tests it makes fail. A failure there counts as the finding only
when the finding's signature explains it: `explains` is a predicate over the failed case's structured records
and message. A failure it does not explain stays a failure, named "not explained by <slug>"; a watched test
that passes is a failure too (the engine no longer shows the bug: the entry must go). Nothing here changes
what a test checks.

A finding's fix is the write-up's Fix section as code, in its engine's `fixes` folder (the engine record,
harness/subjects/engines/engine.py; vLLM's: harness/subjects/engines/vllm/findings/<slug>/fix.py): `--engine-fixes`
applies it inside the engine process, and a fixed finding watches nothing.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from harness.contract.errors import HarnessError
from harness.subjects.engines.finding_versions import read_measured, watched_versions

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle

FINDINGS_DIR = "docs/findings"  # where the project's findings are written up, <slug>.md
RECORD, FIXES, REPRODUCER, VERSIONS = "finding.py", ("fix.py", "fix.patch"), "reproducer.py", "versions.json"


@dataclass(frozen=True)
class FailedCase:
    """A watched test's failure, as a signature sees it."""

    nodeid: str
    message: str  # the exception, as "Type: message" (not the traceback, whose source lines are the test's)
    records: Mapping[str, Any]  # record kind -> the record the test attached (harness/contract/records.py)
    watched_by: tuple[str, ...]  # the slugs of every finding watching this test
    model: Callable[[], ModelBundle]  # the model under test, loaded on first call (signatures that recompute)


@dataclass(frozen=True)
class Finding:
    """A bug in an engine, the versions and flavours it was found in, the tests it fails (node-id patterns
    relative to suites/, where only `*` is special) per model (fixture directory name; "*" = any), and its
    signature: in words, and as the predicate that decides whether a failure is this bug."""

    slug: str
    title: str
    engine: str
    decoders: tuple[str, ...]
    found_in: str  # the release it was found in; the releases it watches are measured (`versions`)
    flavours: tuple[str, ...]
    failing: dict[str, tuple[str, ...]]  # model name -> node-id patterns
    signature: str
    explains: Callable[[FailedCase], bool]
    passing: dict[str, tuple[str, ...]] = field(default_factory=dict)  # exceptions: in `failing`, yet pass
    # exceptions on some releases only, measured: release -> node-id patterns in `failing` that pass there (the bug is
    # in that release, but those tests do not reach it)
    passing_on: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # tests whose failure depends on random draws: watched (a failure must be explained), but a pass proves no fix
    may_fail: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the engine's model runners it was shown on (vLLM: v1, v2); empty for an engine with no choice of runner. On a
    # runner it was not shown on, it watches nothing: a failure there is a failure until its reproducer shows the bug
    runners: tuple[str, ...] = ()
    # its folder (set where it is discovered), which holds its fix, reproducer and measured releases; and its write-up,
    # where not docs/findings/<slug>.md (a finding of an engine packaged elsewhere keeps it in its folder)
    folder: Path | None = None
    write_up: str | None = None

    @property
    def versions(self) -> tuple[str, ...]:
        """The releases it watches: where its reproducer reproduced it (its folder's versions.json, written by
        `mtp-harness matrix --record`; harness/subjects/engines/finding_versions.py), and the release it was found in
        unless measured absent there."""
        return watched_versions(self.slug, self.found_in, read_measured(self.slug, self.folder))

    @property
    def document(self) -> str:
        return self.write_up or f"{FINDINGS_DIR}/{self.slug}.md"

    @property
    def fix(self) -> Path | None:
        """Its documented fix, as code the engine runs (fix.py: patches the engine as it imports; fix.patch: built
        into its source); None where none is written."""
        return next((self.folder / name for name in FIXES if self.folder and (self.folder / name).is_file()), None)

    @property
    def reproducer(self) -> Path | None:
        """Its standalone reproducer, which uses the engine alone."""
        path = self.folder / REPRODUCER if self.folder is not None else None
        return path if path is not None and path.is_file() else None

    def applies(self, decoder: str, version: str | None, flavour: str, runner: str | None = None) -> bool:
        shown_on_runner = not self.runners or runner in self.runners
        return decoder in self.decoders and version in self.versions and flavour in self.flavours and shown_on_runner

    def fails(self, model: str, test_id: str, version: str | None = None) -> bool:
        """Does the bug make this test fail (or, for a `may_fail` test, can it), on `version` where given?"""
        passes_here = version is not None and any(_matches(p, test_id) for p in self.passing_on.get(version, ()))
        listed = _listed(self.failing, model, test_id) and not _listed(self.passing, model, test_id)
        return (listed and not passes_here) or self.may(model, test_id)

    def may(self, model: str, test_id: str) -> bool:
        """Is this a test the bug fails only when its random draws reach it (a pass there is no XPASS)?"""
        return _listed(self.may_fail, model, test_id)


def discover_findings(findings: Path, package: str) -> tuple[Finding, ...]:
    """The findings in folder `findings`, one folder each, by slug: the folder's finding.py declares `FINDING` (its
    record and signature), loaded as module `<package>.<folder>.finding`. Nothing lists them: a new folder is a new
    finding. A folder whose record names another slug is refused."""
    found = []
    for record in sorted(findings.glob(f"*/{RECORD}")):
        name = f"{package}.{record.parent.name.replace('-', '_')}.finding"
        spec = importlib.util.spec_from_file_location(name, record)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its functions name their module (introspection, tests)
        spec.loader.exec_module(module)
        finding = module.FINDING
        if finding.slug != record.parent.name:
            raise HarnessError(f"{record}: its finding is {finding.slug!r}; a finding's folder is named by its slug")
        found.append(replace(finding, folder=record.parent))
    return tuple(found)


def finding_named(findings: Sequence[Finding], slug: str) -> Finding:
    return next(finding for finding in findings if finding.slug == slug)


def signature_module(findings: Sequence[Finding], slug: str) -> ModuleType:
    """The module of finding `slug`'s record and signature (its finding.py): the signature's helpers, for tests."""
    return sys.modules[finding_named(findings, slug).explains.__module__]


def _listed(table: dict[str, tuple[str, ...]], model: str, test_id: str) -> bool:
    return any(_matches(pattern, test_id) for pattern in table.get(model, ()) + table.get("*", ()))


def _matches(pattern: str, test_id: str) -> bool:
    """`*` matches any run of characters; everything else (brackets of parametrized ids included) is literal."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), test_id) is not None


def suite_relative(nodeid: str) -> str:
    """A node id without the path up to suites/ ('greedy/test_x.py::test_y[z]'), wherever the suites live."""
    marker = "suites/"
    return nodeid[nodeid.index(marker) + len(marker) :] if marker in nodeid else nodeid


def known_failures(
    findings: Sequence[Finding],
    decoder: str,
    version: str | None,
    flavour: str,
    model: str,
    nodeid: str,
    fixed: frozenset[str] = frozenset(),
    runner: str | None = None,
) -> list[Finding]:
    """The findings that make test `nodeid` fail for this decoder, engine version, flavour, model runner and model,
    leaving out those whose fix the engine runs with (`fixed`: slugs)."""
    test_id = suite_relative(nodeid)
    return [
        f
        for f in findings
        if f.slug not in fixed and f.applies(decoder, version, flavour, runner) and f.fails(model, test_id, version)
    ]


def explaining(findings: Sequence[Finding], case: FailedCase) -> tuple[list[Finding], list[tuple[str, str]]]:
    """The findings whose signature explains the failure, and (slug, error) for each signature that raised
    (a signature that cannot read a failure does not explain it)."""
    found, errors = [], []
    for finding in findings:
        try:
            if finding.explains(case):
                found.append(finding)
        except Exception as error:
            errors.append((finding.slug, f"{type(error).__name__}: {error}"))
    return found, errors
