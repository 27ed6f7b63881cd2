"""transformers-mtp-misses-a-stop-string-completed-inside-a-pass: under MTP generation, a stop string completed by a
token that is not the last one its verification pass emits is never seen, and the output runs on past it.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`ran_past_a_stop_completed_inside_a_pass`. Beside it: its standalone reproducer (reproducer.py) and the releases it
was measured on (versions.json); its write-up is
docs/findings/transformers-mtp-misses-a-stop-string-completed-inside-a-pass.md.
"""

from __future__ import annotations

import re

from harness.subjects.engines.findings import FailedCase, Finding

# suites/features/test_stop_sequences.py check_ended_there: where the stop completes, how many tokens came, the passes
RAN_ON = re.compile(r"completes at output position (\d+) \([^)]*\): expected the output to end there, got (\d+) tokens")
PASS = re.compile(r"VerifyStep\(start=(\d+), drafts=\([^)]*\), accepted=\d+, emitted=\(([^)]*)\)\)")


def ran_past_a_stop_completed_inside_a_pass(case: FailedCase) -> bool:
    """The output ran on past the position where the stop string completes (more tokens than up to it), and that
    position was emitted by a verification pass that emitted more tokens after it: transformers' assisted decoding
    crops a pass's tokens at an EOS and at the length only (generation/utils.py:4155-4170, 5.25.0) and asks the
    stopping criteria once, of the sequence's end (:4251), and StopStringCriteria matches a stop string only at the end
    of the sequence. A stop completed by a pass's last token, or an output that stopped early, is not explained."""
    ran_on = RAN_ON.search(case.message)
    if ran_on is None:
        return False
    end, emitted = int(ran_on.group(1)), int(ran_on.group(2))
    if emitted <= end + 1:
        return False
    for start, tokens in PASS.findall(case.message):
        count = len([token for token in tokens.split(",") if token.strip()])
        if int(start) <= end < int(start) + count:
            return end < int(start) + count - 1  # not the pass's last token
    return False


STOP_STRING_CASES = "features/test_stop_sequences.py::test_stop_string_ends_the_output_at_the_token_completing_it[*]"
FINDING = Finding(
    slug="transformers-mtp-misses-a-stop-string-completed-inside-a-pass",
    title="under MTP generation, a stop string completed by a token that is not the last of its verification pass "
    "(an accepted draft followed by more) is never seen: assisted decoding crops a pass at EOS and length only, and "
    "StopStringCriteria matches only at the sequence's end, so the output runs on past the stop",
    engine="transformers",
    decoders=("transformers-mtp",),
    found_in="5.25.0",
    flavours=("cpu", "cuda"),
    # each case forces the drafts to the target's own tokens, so the stop's token is an accepted draft with the
    # pass's correction or bonus token after it
    failing={"*": (STOP_STRING_CASES,)},
    # 5.15.1 to 5.17.0 ask the stopping criteria of a whole candidate before verifying it (`is_done_candidate`, which
    # takes n_matches one lower when it completes a stop, generation/utils.py in those releases; 5.18.0 removed it):
    # with one draft a pass (k = 1) the candidate's end is the stop's token, so the target emits it and the stop is
    # seen (measured by the matrix, 2026-12-07); with two the stop's token is a draft inside the candidate, missed
    passing_on=dict.fromkeys(("5.15.1", "5.16.1", "5.17.0"), (STOP_STRING_CASES.replace("[*]", "[*-k1-*]"),)),
    signature="a stop-string case whose output ran on past the position where the stop completes, that position "
    "emitted by a verification pass that emitted more tokens after it; a stop completed by a pass's last token, an "
    "output that ended too early or at the wrong place is not explained",
    explains=ran_past_a_stop_completed_inside_a_pass,
)
