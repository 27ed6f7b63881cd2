"""The suites, once: each suite's name (its folder under suites/ and its pytest marker), what it checks, and what the
harness does with it. The command line (`--suite`), the pytest plugin (markers), the mutation catalogue,
`harness.testing`, the summaries and the docs read this table; a new suite is a folder under
suites/ and one entry here."""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from harness.contract.errors import HarnessError


@dataclass(frozen=True)
class Suite:
    """name: folder under suites/ and pytest marker; what: the marker's description; catalogue: the mutation catalogue
    runs it against every mutant, and `harness.testing` offers its checks to a user's test file."""

    name: str
    what: str
    catalogue: bool = True


SUITES: tuple[Suite, ...] = (  # in the order the mutation catalogue runs them: the cheapest catch first
    Suite("greedy", "greedy suites: token-for-token identity with target-only greedy decoding"),
    Suite("invariants", "invariant suites: KV cache and position state after every rejection"),
    Suite("sampling", "sampling suites: chi-square / G tests against the exact target distribution"),
    Suite(
        "features",
        "features suite: request features (penalties, min_p, logit bias, min_tokens, stop sequences, logprobs) "
        "under speculation",
    ),
    Suite(
        "engine",
        "engine suite: an engine subject under its deployed configurations (prefix cache, chunked prefill, ...)",
        catalogue=False,
    ),
)
SUITE_NAMES = tuple(suite.name for suite in SUITES)
CATALOGUE_SUITES = tuple(suite.name for suite in SUITES if suite.catalogue)  # greedy, invariants, sampling, features
ALL = "all"  # --suite all: every suite
# markers that are not suites: what the harness's tests may be marked with besides
OTHER_MARKERS = {
    "gpu": "needs CUDA; skipped with a reason where there is none",
    "slow": "takes minutes; run nightly",
}


def suite_named(name: str) -> Suite:
    """The suite called `name`; a HarnessError names the known ones (and the near matches)."""
    for suite in SUITES:
        if suite.name == name:
            return suite
    close = difflib.get_close_matches(name, SUITE_NAMES, n=2)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise HarnessError(f"unknown suite {name!r}.{hint} Known: {', '.join(SUITE_NAMES)}")


def parse_suites(value: str) -> tuple[str, ...]:
    """`greedy`, `greedy,invariants` or `all` -> the suite names, in the table's order."""
    names = [name.strip() for name in value.split(",") if name.strip()]
    if not names:
        raise HarnessError(f"{value!r}: name one or more suites ({', '.join(SUITE_NAMES)}) or {ALL}")
    if ALL in names:
        return SUITE_NAMES
    wanted = {suite_named(name).name for name in names}
    return tuple(name for name in SUITE_NAMES if name in wanted)


NOT_APPLICABLE = "not applicable: "  # a skip's reason that starts so: the suite cannot apply to this decoder at all


def marker_expression(suites: tuple[str, ...]) -> str:
    """The pytest -m expression that selects `suites`."""
    return " or ".join(suites)


def parse_minimums(value: str) -> dict[str, int]:
    """--min-judged SUITE=N[,SUITE=N...]: the fewest judged cases a run asks of each suite named."""
    minimums = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        name, equals, count = item.partition("=")
        if not equals or not count.strip().isdigit():
            raise HarnessError(f"write SUITE=N, N a whole number ({item!r})")
        suite_named(name.strip())  # an unknown suite is named, with near matches
        minimums[name.strip()] = int(count)
    return minimums
