"""Fix of vllm-glm4-moe-mtp-chains-drafts-from-the-pre-norm-hidden-state.

GLM-4.5's MTP layer returns its pre-norm residual stream, and vLLM's proposer hands that to the next draft step
(`compute_logits` applies `shared_head` for the logits only). vLLM fixed this for DeepSeek and GLM-5: their layer
returns `(hidden_states, shared_head(hidden_states))` and their architecture is listed in
`SpecDecodeBaseProposer.model_returns_tuple`, so the next step reads the normed state. The fix does the same for
`Glm4MoeMultiTokenPredictorLayer` and `Glm4MoeMTPModel`.
"""

from types import ModuleType

# the position-0 fix recompiles the layer's forward, which this fix then wraps
APPLY_AFTER = ("vllm-mtp-zeroes-the-token-embedding-at-position-0",)


def patch_layer(module: ModuleType) -> None:
    layer = module.Glm4MoeMultiTokenPredictorLayer
    shipped_forward = layer.forward

    def forward(self: object, *args: object, **kwargs: object) -> tuple[object, object]:
        # the pre-norm hidden state for the logits (compute_logits applies shared_head), the normed one for the
        # next draft step, as deepseek_mtp.py does
        hidden_states = shipped_forward(self, *args, **kwargs)
        return hidden_states, self.shared_head(hidden_states)

    layer.forward = forward


def patch_proposer(module: ModuleType) -> None:
    proposer = module.SpecDecodeBaseProposer
    shipped_returns_tuple = proposer.model_returns_tuple

    def model_returns_tuple(self: object) -> bool:
        architectures = self.draft_model_config.hf_config.architectures or []
        return (self.method == "mtp" and "Glm4MoeMTPModel" in architectures) or shipped_returns_tuple(self)

    proposer.model_returns_tuple = model_returns_tuple


PATCHES = {
    "vllm.model_executor.models.glm4_moe_mtp": patch_layer,
    "vllm.v1.spec_decode.llm_base_proposer": patch_proposer,
}
