"""transformers-mtp-runs-past-an-eos-inside-an-accepted-run: in 5.15.1, MTP generation does not stop at an EOS that
an accepted draft brings in the middle of a verification pass: the pass's later tokens are kept and generation goes
on.

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`passes_ran_past_the_output`. Beside it: its standalone reproducer (reproducer.py) and the releases it was measured on
(versions.json); its write-up is docs/findings/transformers-mtp-runs-past-an-eos-inside-an-accepted-run.md.
"""

from __future__ import annotations

import re

from harness.subjects.engines.findings import FailedCase, Finding

RAN_PAST = re.compile(r"its passes break the pass contract: the passes emitted (\d+) tokens .*?, the output is (\d+)")


def passes_ran_past_the_output(case: FailedCase) -> bool:
    """The decode's passes emitted more tokens than its output holds: transformers went on past the EOS (which the
    adapter's output ends at, as the contract asks), because in 5.15.1 MTPCandidateGenerator drafts past an EOS,
    `_assisted_decoding` crops a pass's accepted tokens at the length budget only (generation/utils.py:3781-3785) and
    its EOS criterion reads only the sequence's last token. Passes that emitted fewer tokens than the output, or any
    other break of the pass contract, are not explained."""
    found = RAN_PAST.search(case.message)
    return found is not None and int(found.group(1)) > int(found.group(2))


FINDING = Finding(
    slug="transformers-mtp-runs-past-an-eos-inside-an-accepted-run",
    title="in 5.15.1, MTP generation does not stop at an EOS an accepted draft brings mid-pass: the drafts go on past "
    "it, the pass's later tokens are kept (assisted decoding crops at the length budget only) and generation goes on",
    engine="transformers",
    decoders=("transformers-mtp",),
    found_in="5.15.1",
    flavours=("cpu", "cuda"),
    # the EOS is an accepted draft with the pass's next tokens after it only where k >= 2 (transformers serves k <= 2
    # on the two-depth fixtures); at k = 1 the pass ends with the bonus token after it too, so every k it serves
    # and the features suite's min_tokens cases whose EOS an accepted draft brings mid-pass on tiny-deepseek-v3 with its
    # natural drafts (measured by the matrix on 5.15.1, 2026-12-07: which cases depends on the drafts)
    failing={
        "*": ("greedy/test_eos_and_length.py::test_eos_inside_an_accepted_run_ends_the_output_there[*]",),
        "tiny-deepseek-v3": (
            "features/test_feature_greedy.py::test_greedy_output_under_the_feature[min-tokens-at-the-eos-free-k2-*]",
            "features/test_feature_greedy.py::test_greedy_output_under_the_feature[min-tokens-unmet-free-k2-soup-01]",
        ),
    },
    signature="the decode's passes emitted more tokens than its output, which ends at the EOS (the engine went on "
    "past an EOS inside a pass); any other break of the pass contract is not explained",
    explains=passes_ran_past_the_output,
)
