"""Bugs the harness found in other people's engines, and the tests each one makes fail.

Each finding is written up in docs/findings/<slug>.md (version, the harness's evidence, root cause with file
and line, a standalone reproducer). While the engine version it was found in is the one under test, the
plugin marks exactly the tests it makes fail as strict xfails naming the finding: they stay visible in every
run, a fix in the engine turns them into XPASS failures (so the entry is removed), and any other failure
still fails. Nothing here changes what a test checks.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

FINDINGS_DIR = "docs/findings"


@dataclass(frozen=True)
class Finding:
    """A bug in an engine, the versions and flavours it was found in, and the tests it fails (node-id
    patterns relative to suites/, where only `*` is special), per model (fixture directory name; "*" = any)."""

    slug: str
    title: str
    engine: str
    decoders: tuple[str, ...]
    versions: tuple[str, ...]
    flavours: tuple[str, ...]
    failing: dict[str, tuple[str, ...]]  # model name -> node-id patterns
    passing: dict[str, tuple[str, ...]] = field(default_factory=dict)  # exceptions: in `failing`, yet pass
    crashes: bool = False  # some of its failing tests end in an engine error rather than a failed check

    @property
    def document(self) -> str:
        return f"{FINDINGS_DIR}/{self.slug}.md"

    def applies(self, decoder: str, version: str | None, flavour: str) -> bool:
        return decoder in self.decoders and version in self.versions and flavour in self.flavours

    def fails(self, model: str, test_id: str) -> bool:
        def listed(table: dict[str, tuple[str, ...]]) -> bool:
            return any(_matches(pattern, test_id) for pattern in table.get(model, ()) + table.get("*", ()))

        return listed(self.failing) and not listed(self.passing)


def _matches(pattern: str, test_id: str) -> bool:
    """`*` matches any run of characters; everything else (brackets of parametrized ids included) is literal."""
    return re.fullmatch(".*".join(map(re.escape, pattern.split("*"))), test_id) is not None


def suite_relative(nodeid: str) -> str:
    """A node id without the path up to suites/ ('greedy/test_x.py::test_y[z]'), wherever the suites live."""
    marker = "suites/"
    return nodeid[nodeid.index(marker) + len(marker) :] if marker in nodeid else nodeid


def known_failures(
    findings: Sequence[Finding], decoder: str, version: str | None, flavour: str, model: str, nodeid: str
) -> list[Finding]:
    """The findings that make test `nodeid` fail for this decoder, engine version, flavour and model."""
    test_id = suite_relative(nodeid)
    return [f for f in findings if f.applies(decoder, version, flavour) and f.fails(model, test_id)]
