"""A hybrid-state bug of the harness's own making, for the suites on a Qwen3-Next fixture in vLLM: a rejected draft's
update of the gated DeltaNet's recurrent state is not rolled back. vLLM's CPU speculative path stores the recurrent
state after each token t of a step in the request's slot t, and the next step resumes from the slot of its last
accepted token (vllm/model_executor/layers/mamba/ops/cpu/gdn_attention.py `_spec_forward`, the op
fused_sigmoid_gating_delta_rule_update_spec_cpu). This mutant copies the state after the step's last token into every
slot of the step, so the next step resumes from a state that has seen the rejected drafts. The convolution buffer and
everything else are untouched; a step whose drafts are all accepted is unchanged.

Installed in the engine's process through MTP_HARNESS_ENGINE_MUTANTS (harness/subjects/engines/serving/fixes/
sitecustomize.py, which must be on its PYTHONPATH); run by tests/test_vllm_hybrid_rollback_mutant.py."""

from types import ModuleType

OPS_MODULE = "vllm._custom_ops"


def keep_the_rejected_drafts(module: ModuleType) -> None:
    shipped = module.fused_sigmoid_gating_delta_rule_update_spec_cpu

    def update_without_rollback(*args, **kwargs):
        out = shipped(*args, **kwargs)
        state, slots, starts = kwargs["initial_state_source"], kwargs["spec_state_indices"], kwargs["cu_seqlens"]
        for request in range(slots.shape[0]):
            tokens = int(starts[request + 1]) - int(starts[request])
            if tokens > 1:
                last = int(slots[request, tokens - 1])
                for column in range(tokens - 1):
                    state[int(slots[request, column])] = state[last]
        return out

    module.fused_sigmoid_gating_delta_rule_update_spec_cpu = update_without_rollback


PATCHES = {OPS_MODULE: keep_the_rejected_drafts}
