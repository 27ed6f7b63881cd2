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
harness/subjects/engines/engine.py; vLLM's: harness/subjects/engines/vllm/fixes/<slug with _>.py): `--engine-fixes`
applies it inside the engine process, and a fixed finding watches nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from harness.subjects.engines.finding_versions import watched_versions

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle

FINDINGS_DIR = "docs/findings"


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
    # tests whose failure depends on random draws: watched (a failure must be explained), but a pass proves no fix
    may_fail: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # the engine's model runners it was shown on (vLLM: v1, v2); empty for an engine with no choice of runner. On a
    # runner it was not shown on, it watches nothing: a failure there is a failure until its reproducer shows the bug
    runners: tuple[str, ...] = ()

    @property
    def versions(self) -> tuple[str, ...]:
        """The releases it watches: where its reproducer reproduced it (harness/subjects/engines/finding_versions.py,
        written by `mtp-harness matrix --record`), and the release it was found in unless measured absent there."""
        return watched_versions(self.slug, self.found_in)

    @property
    def document(self) -> str:
        return f"{FINDINGS_DIR}/{self.slug}.md"

    def applies(self, decoder: str, version: str | None, flavour: str, runner: str | None = None) -> bool:
        shown_on_runner = not self.runners or runner in self.runners
        return decoder in self.decoders and version in self.versions and flavour in self.flavours and shown_on_runner

    def fails(self, model: str, test_id: str) -> bool:
        """Does the bug make this test fail (or, for a `may_fail` test, can it)?"""
        return (_listed(self.failing, model, test_id) and not _listed(self.passing, model, test_id)) or self.may(
            model, test_id
        )

    def may(self, model: str, test_id: str) -> bool:
        """Is this a test the bug fails only when its random draws reach it (a pass there is no XPASS)?"""
        return _listed(self.may_fail, model, test_id)


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
        if f.slug not in fixed and f.applies(decoder, version, flavour, runner) and f.fails(model, test_id)
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
