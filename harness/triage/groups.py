"""Failure triage: a run's failures grouped by cause, each group with its smallest case and a command that
re-runs it. Pure functions over results.json's cases (harness/plugin/recorder.py writes them; the report shows them).

A group's signature is what the failures share, never what merely varies between them (prompt, k, the
schedule's positions): the suite and test, and then
- a greedy divergence: where the first divergent token sits in the decoder's verification passes (an
  accepted draft, the target's token after a rejected draft, the bonus token after all drafts were accepted,
  a pass without drafts), whether the pass before it rejected a draft, and whether a draft was forced there;
- an invariant failure: the first broken invariant and where (target cache, MTP depth d, layer l);
- a sampling failure: which statistics rejected and where the excess sits (the most likely cell, a less
  likely one or the pooled tail, over- or under-represented; for a PIT, low or high u);
- anything else: the first line of the message with numbers and lists blanked out, or the exception type.
"""

from __future__ import annotations

import re
import shlex
from collections import Counter
from collections.abc import Iterable
from typing import Any

from harness.contract.records import (
    CaseRecord,
    DivergenceRecord,
    GroupRecord,
    KnownGroupRecord,
    RunHeader,
    SamplingRecord,
)
from harness.contract.run_options import RunOptions, pytest_arguments

FAILING = ("failed", "error")
NUMBER = re.compile(r"-?\d+(\.\d+)?(e-?\d+)?")
BRACKETED = re.compile(r"\[[^\[\]]*\]|\([^()]*\)|\{[^{}]*\}")
QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
ERROR_LINE = re.compile(r"^E\s+")  # pytest's lines of the failing assertion or exception
HEX = re.compile(r"0x[0-9a-fA-F]+")
EXCEPTION_LINE = re.compile(r"^E\s+(\w+(?:Error|Exception|Exit)\b)", re.MULTILINE)
MESSAGE_WORDS = 90  # characters of a normalised message kept in a signature


def test_function_of(nodeid: str) -> str:
    """`suites/greedy/test_x.py::test_y[params]` -> `test_x.py::test_y`."""
    path, _, rest = nodeid.partition("::")
    return f"{path.rsplit('/', 1)[-1]}::{rest.split('[', 1)[0]}"


def divergence_place(divergence: DivergenceRecord) -> str:
    """Where the first divergent token sits relative to the decoder's passes and the forced drafts, in words."""
    index, steps = divergence["index"], divergence.get("steps") or []
    forced = {int(position) for position in divergence.get("forced_drafts") or {}}
    expected, actual = len(divergence.get("reference_tokens") or []), len(divergence.get("actual_tokens") or [])
    if index == expected < actual:
        return "past the expected end: the decoder emitted more tokens than it should (EOS or max_new_tokens)"
    if index == actual < expected:
        return "the decoder's output ends early"
    containing = [i for i, step in enumerate(steps) if step["start"] <= index]
    if not containing:
        return "before any verification pass"
    number = containing[-1]
    step = steps[number]
    offset, drafts, accepted = index - step["start"], len(step["drafts"]), step["accepted"]
    if offset >= len(step["emitted"]) and number == len(steps) - 1:
        slot = "past the decoder's last token (it stopped early)"
    elif drafts == 0:
        slot = "in a pass without drafts"
    elif offset < accepted:
        slot = "at an accepted draft"
    elif offset == accepted < drafts:
        slot = "at the target's token after a rejected draft"
    elif offset == drafts:
        slot = "at the bonus token after every draft was accepted"
    else:
        slot = "past the pass's committed tokens"
    words = [slot]
    if number > 0 and steps[number - 1]["accepted"] < len(steps[number - 1]["drafts"]):
        words.append("in the pass after a rejection")
    if index in forced:
        words.append("where a draft was forced")
    return ", ".join(words)


def excess_place(sampling: SamplingRecord) -> str:
    """Where a rejected sampling case's largest departure sits, in words that do not depend on the prompt.

    Law cases: the cell with the largest |observed - expected| / sqrt(expected) (its Pearson residual), named
    by its rank in expected count. PIT cases: whether the histogram's excess is at low or high u (a bias
    toward the token order's head or tail)."""
    cells = sampling.get("cells_table") or []
    if cells:
        residual = [(c["observed"] - c["expected"]) / max(c["expected"], 1e-12) ** 0.5 for c in cells]
        worst = max(range(len(cells)), key=lambda i: abs(residual[i]))
        ranked = sorted(range(len(cells)), key=lambda i: -cells[i]["expected"])
        if str(cells[worst]["label"]).startswith("<other"):
            cell = "the pooled tail"
        elif ranked[0] == worst:
            cell = "the most likely continuation"
        else:
            cell = "a less likely continuation"
        return f"; {cell} {'over' if residual[worst] > 0 else 'under'}-represented"
    positions = sampling.get("positions") or []
    alpha = sampling.get("family_alpha", 0.0)
    rejected_at = [at for at in positions if min(at["ks_holm"], at["z_holm"]) <= alpha]
    if rejected_at:
        worst = min(rejected_at, key=lambda at: min(at["ks_holm"], at["z_holm"]))
        what = f" ({worst['what']})" if worst["what"] else ""
        side = "more likely" if worst["z"] > 0 else "less likely"
        return f"; at output position {worst['position']}{what}: u {worst['u_moved']}, {side} tokens over-drawn"
    histogram = sampling.get("pit_histogram") or []
    if len(histogram) >= 2:
        half = len(histogram) // 2
        low, high = sum(histogram[:half]), sum(histogram[-half:])
        return f"; PIT mass toward {'low' if low > high else 'high'} u"
    return ""


def normalised_message(message: str) -> str:
    """The first meaningful line of a failure message (pytest's first `E` line when the message is a
    traceback: the lines above it show the test's arguments) with what varies between cases blanked out."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    line = next((ERROR_LINE.sub("", line) for line in lines if ERROR_LINE.match(line)), lines[0] if lines else "")
    line = re.sub(r"^prompt [\w-]+[:,]\s*", "", line)
    line = HEX.sub("0x…", line)
    line = QUOTED.sub("'…'", line)
    for _ in range(3):  # nested lists
        line = BRACKETED.sub("[…]", line)
    return NUMBER.sub("N", line)[:MESSAGE_WORDS]


def signature(case: CaseRecord) -> tuple[str, ...]:
    """What a failing case's cause looks like (see the module docstring); equal signatures share a group."""
    where = (case["suite"], test_function_of(case["nodeid"]))
    message = str(case.get("message") or "")
    if case["outcome"] == "error" or (EXCEPTION_LINE.search(message) and "AssertionError" not in message):
        crash = EXCEPTION_LINE.search(message)
        return (*where, f"raised {crash.group(1) if crash else 'an error'}")
    divergence = case.get("divergence")
    if divergence and not divergence.get("near_tie"):
        return (*where, f"greedy divergence {divergence_place(divergence)}")
    invariants = case.get("invariants") or {}
    if invariants.get("violations"):
        first = invariants["violations"][0]
        return (*where, f"invariant '{first['invariant']}' broken in {first['where']}")
    sampling = case.get("sampling")
    if sampling and sampling.get("rejected"):
        alpha = sampling.get("family_alpha", 0.0)
        tests = [p["test"] for p in sampling.get("p_values", []) if p["holm"] <= alpha]
        tests += [
            name
            for name, key in (("KS at one position", "ks_holm"), ("log-likelihood at one position", "z_holm"))
            if any(at[key] <= alpha for at in sampling.get("positions") or [])
        ]
        return (*where, f"sampling law rejected by {', '.join(tests) or 'the family'}{excess_place(sampling)}")
    return (*where, normalised_message(message))


def case_size(case: CaseRecord) -> tuple[int, ...]:
    """Smaller is simpler: k, forced drafts, output length, then prompt length (as far as the record says)."""
    divergence = case.get("divergence") or {}
    params = case.get("params") or {}
    k = divergence.get("num_draft_tokens") or _int(params.get("k")) or 0
    forced = len(divergence.get("forced_drafts") or {})
    output = len(divergence.get("reference_tokens") or [])
    return (k, forced, output, len(case["nodeid"]))


def _int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def describe(key: tuple[str, ...]) -> str:
    suite, test, cause = key
    return f"{suite}: {test}: {cause}"


def rerun_command(nodeid: str, run: RunHeader) -> str:
    """A command that re-runs one case with every option of its run (decoder, model, device, dtype, budget, session
    seed, reference, engine configuration, fixes and arguments, prompts, sampling shift: the run header's options,
    written back by harness/contract/run_options.py pytest_arguments). Node ids are relative to the suites' root,
    DATA_ROOT of harness/contract/paths.py, where suites_pytest runs them."""
    from harness.contract.invocation import suites_pytest
    from harness.contract.paths import DATA_ROOT

    options = RunOptions.from_record(run.get("options") or {})
    command = suites_pytest([f"{DATA_ROOT}/{nodeid}"], cache=False) + pytest_arguments(options)
    return shlex.join(["python", *command[1:]])


def failure_groups(cases: Iterable[CaseRecord], run: RunHeader) -> list[GroupRecord]:
    """The run's failing cases grouped by signature, largest group first; each with its smallest case and the
    command that re-runs that case."""
    groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    for case in cases:
        if case["outcome"] in FAILING:
            groups.setdefault(signature(case), []).append(case)
    ordered = sorted(groups.items(), key=lambda item: (-len(item[1]), item[0]))
    result = []
    for number, (key, members) in enumerate(ordered, start=1):
        smallest = min(members, key=case_size)
        result.append(
            {
                "group": number,
                "signature": describe(key),
                "suite": key[0],
                "cause": key[2],
                "count": len(members),
                "smallest": smallest["nodeid"],
                "cases": sorted(case["nodeid"] for case in members),
                "rerun": rerun_command(smallest["nodeid"], run),
            }
        )
    return result


def known_groups(cases: Iterable[CaseRecord]) -> list[KnownGroupRecord]:
    """The run's expected failures grouped under the findings that explained them ("known: <slug>"): per finding,
    how many cases, which, and how they failed, in the words of failure groups' causes (largest first)."""
    members: dict[str, list[CaseRecord]] = {}
    for case in cases:
        known = case.get("known")
        if case["outcome"] == "xfailed" and known:
            for slug in known["findings"]:
                members.setdefault(slug, []).append(case)
    groups = []
    for slug, found in sorted(members.items(), key=lambda item: (-len(item[1]), item[0])):
        causes = Counter(describe(signature(case)) for case in found)
        groups.append(
            KnownGroupRecord(
                finding=slug,
                count=len(found),
                causes=[{"cause": cause, "count": count} for cause, count in causes.most_common()],
                cases=sorted(case["nodeid"] for case in found),
            )
        )
    return groups
