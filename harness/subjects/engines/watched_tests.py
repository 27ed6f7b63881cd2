"""The suites' tests that engine findings watch (harness/subjects/engines/<engine>/findings.py), as node-id patterns
relative to suites/ (harness/subjects/engines/findings.py: only `*` is special)."""

FORCED = "greedy/test_forced_rejections.py::test_forced_rejections_keep_the_reference"
RANDOM_REJECTIONS = "greedy/test_forced_rejections.py::test_rejections_at_random_positions_keep_the_reference"
NATURAL = "greedy/test_greedy_identity.py::test_natural_drafts_reproduce_the_reference"
BATCH_ALONE = "greedy/test_greedy_identity.py::test_a_batch_of_mixed_prompts_equals_each_prompt_alone"
CONFORMANCE = "invariants/test_draft_conformance.py::test_greedy_drafts_equal_the_harness_proposers"
RNG_ISOLATION = "invariants/test_rng_isolation.py::test_a_sampled_request_is_independent_of_its_batch"
FEATURE_LAWS = "features/test_feature_laws.py::test_samples_follow_the_law_under_the_features"
FEATURE_GREEDY = "features/test_feature_greedy.py::test_greedy_output_under_the_feature"
SPECULATION = (
    "invariants/test_speculation_keeps_seeded_samples.py::test_a_seeded_sample_is_the_same_with_and_without_speculation"
)

# the engine suite (suites/engine/): the checks that compare drafts with the checkpoint's MTP computation under a
# deployed configuration, and those that compare a seeded request's samples between two runs
PREFIX_AGAIN = "engine/test_prefix_cache.py::test_a_prompt_decoded_again_decodes_as_on_a_cold_cache"
PREFIX_SHARED = (
    "engine/test_prefix_cache.py::"
    "test_prompts_sharing_a_long_prefix_start_from_its_cached_blocks_and_decode_as_the_reference"
)
CHUNKED = "engine/test_chunked_prefill.py::test_prompts_prefilled_in_chunks_decode_as_the_reference"
PREEMPTED = "engine/test_preemption.py::test_preempted_requests_decode_as_the_reference"
QUEUED = "engine/test_queueing.py::test_requests_queued_behind_the_sequence_limit_decode_as_the_reference"
ENGINE_CONFORMANCE = (PREFIX_AGAIN, PREFIX_SHARED, CHUNKED, PREEMPTED, QUEUED)
ENGINE_SEEDED = (
    "engine/test_queueing.py::test_a_queued_seeded_request_samples_what_it_samples_scheduled_at_once",
    "engine/test_run_to_run.py::test_two_fresh_engines_give_the_same_seeded_samples",
)
