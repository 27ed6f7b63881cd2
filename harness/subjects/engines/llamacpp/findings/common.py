"""What the llamacpp findings share: the release they were found in, the test ids several of them watch."""

from __future__ import annotations

FOUND_IN = "2026.10.11549"  # the xllamacpp release (llama.cpp tree) these were found in; it reports b0-unknown
# the features suite's logprob checks: greedy requests asking for the top 5, and sampled ones with greedy drafts
GREEDY_LOGPROBS = "features/test_feature_greedy.py::test_greedy_output_under_the_feature[logprobs-top-5-*]"
SAMPLED_LOGPROBS = "features/test_logprobs.py::test_logprobs_are_the_targets[logprobs-*-greedy-*]"
