"""llamacpp-draft-mtp-drops-accepted-tokens-at-the-context-end: with draft-mtp, a pass whose accepted drafts reach the
end of the slot's context emits only part of what it accepted: the output stops up to k tokens short of the same
request without speculation.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`cut_short_at_the_context_end`. Beside it: its fix (fix.patch), its standalone reproducer (reproducer.py) and the
releases its reproducer was measured on (versions.json); its write-up is
docs/findings/llamacpp-draft-mtp-drops-accepted-tokens-at-the-context-end.md."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness.subjects.engines.findings import FailedCase

if TYPE_CHECKING:
    pass
from harness.subjects.engines.findings import Finding
from harness.subjects.engines.llamacpp.findings.common import FOUND_IN
from harness.subjects.engines.llamacpp.signatures import _prompt_ids, _tokens
from harness.subjects.engines.watched_tests import BATCH_ALONE, FORCED, NATURAL, RANDOM_REJECTIONS, SPECULATION


def _is_proper_prefix(short: Sequence[int], long: Sequence[int]) -> bool:
    return len(short) < len(long) and list(long[: len(short)]) == list(short)


def _prompt_length(case: FailedCase, prompt_id: str) -> int:
    return len(_prompt_ids(case, prompt_id))


def context_end_cut(
    prompt_length: int, steps: Sequence[Mapping[str, Any]], context: int, replays: bool = False
) -> int | None:
    """How many tokens llama.cpp's server emits for a speculative request whose passes reach the context end early,
    read from those passes; None where no pass is cut.

    After verifying a pass that starts with `start` tokens emitted and accepts `a` drafts, the server appends the a
    accepted drafts to the slot's prompt (tools/server/server-context.cpp:4499-4500: n_tokens = P + start + a), then
    emits the pass's tokens one by one. process_token stops the slot at the first of them when n_tokens + 1 >= n_ctx
    (server-context.cpp:2017), and the loop drops the rest of the pass. On a hybrid (`replays`) a pass that rejects
    a draft restores its checkpoint and emits nothing (:4445-4462); the next batch replays its a + 1 tokens as
    drafts, accepts them and the target's next token, and appends a + 1: n_tokens = P + start + a + 1 when the
    pass's tokens are emitted. The cut, with `held` = the tokens appended beyond P + start:

        the first pass with P + start + held + 1 >= n_ctx emits one token: the output is start + 1 long

    where it holds for held = 0 that is the plain stop at the last token that fits (no cut: None)."""
    for step in steps:
        start, accepted = int(step["start"]), int(step["accepted"])
        held = accepted + (1 if replays and accepted < len(step["drafts"]) else 0)
        if prompt_length + start + held + 1 >= context:
            return start + 1 if held >= 1 and prompt_length + start + 1 < context else None
    return None


def _cut_as_predicted(
    case: FailedCase, prompt_length: int, short: Sequence[int], right: Sequence[int], steps: Sequence[Mapping] | None
) -> bool:
    """`short` (decoded in `steps`) is a proper prefix of `right`, exactly as long as context_end_cut predicts."""
    if steps is None or not _is_proper_prefix(short, right):
        return False
    model = case.model()
    return len(short) == context_end_cut(prompt_length, steps, model.max_context, replays=model.is_hybrid)


def cut_short_at_the_context_end(case: FailedCase) -> bool:
    """The output stops early, a prefix of the right one, exactly where context_end_cut says llama.cpp's check
    stops it, from the decode's own passes: the greedy divergence (the output ended where the reference goes on),
    every seeded request that changed with speculation, or the shorter of two decodes of one request."""
    divergence = case.records.get("divergence")
    if divergence:
        if divergence.get("actual_token") is not None:  # a changed token is never this bug
            return False
        tokens = [t["id"] for t in divergence.get("actual_tokens") or []]
        right = [t["id"] for t in divergence.get("reference_tokens") or []]
        return int(divergence["index"]) == len(tokens) and _cut_as_predicted(
            case, len(divergence["prompt_ids"]), tokens, right, divergence.get("steps")
        )
    speculation = case.records.get("speculation")
    if speculation:
        changed = [speculation, *speculation.get("more", [])]
        return all(
            _cut_as_predicted(
                case, len(r["request"]["prompt_ids"]), r["speculative"], r["without"], r.get("speculative_steps")
            )
            for r in changed
        )
    passes = case.records.get("passes")
    if passes and passes.get("other_steps") is not None:
        decodes = [(_tokens(passes["steps"]), passes["steps"]), (_tokens(passes["other_steps"]), passes["other_steps"])]
        (short, steps), (right, _) = sorted(decodes, key=lambda decode: len(decode[0]))
        return _cut_as_predicted(case, _prompt_length(case, passes["prompt_id"]), short, right, steps)
    return False


FINDING = Finding(
    slug="llamacpp-draft-mtp-drops-accepted-tokens-at-the-context-end",
    title="with draft-mtp, a pass whose accepted drafts reach the end of the slot's context emits only part of what "
    "it accepted: the output stops up to k tokens short of the same request without speculation",
    engine="llama.cpp",
    decoders=("llamacpp-mtp",),
    found_in=FOUND_IN,
    flavours=("cpu",),
    failing={},
    # forced rejections and random ones reach the context end with the long prompts (the build from source)
    may_fail={
        "*": (
            f"{NATURAL}[long-*]",
            f"{BATCH_ALONE}[*]",
            f"{SPECULATION}[*]",
            f"{FORCED}[long-*]",
            f"{RANDOM_REJECTIONS}[*]",
        )
    },
    signature="an output that is a proper prefix of the right one (finish 'length'), exactly as long as llama.cpp's "
    "context check cuts it given the decode's passes: the first pass whose accepted (or, on a hybrid, replayed) "
    "tokens reach the last position emits one token; no changed token",
    explains=cut_short_at_the_context_end,
)
