"""Fix of vllm-mtp-zeroes-the-token-embedding-at-position-0 (vllm-project/vllm#33299).

Every MTP layer forward starts with `inputs_embeds = torch.where(positions.unsqueeze(-1) == 0, 0,
inputs_embeds)` ("masking inputs at position 0, as not needed by MTP"), which replaces the first entry of the
MTP layer's KV cache with one the checkpoint never saw. The fix removes that statement (and its comment) from
the forward of each MTP layer that has it, nothing else: the forward is recompiled from vLLM's own source
without those lines.
"""

import inspect
import textwrap
from collections.abc import Callable
from types import FunctionType, ModuleType

MASK_STATEMENT = "inputs_embeds = torch.where(positions.unsqueeze(-1) == 0, 0, inputs_embeds)"
MASK_COMMENT = "# masking inputs at position 0, as not needed by MTP"
LAYERS = {  # module -> the MTP layer class whose forward masks position 0
    "vllm.model_executor.models.deepseek_mtp": "DeepSeekMultiTokenPredictorLayer",
    "vllm.model_executor.models.glm4_moe_mtp": "Glm4MoeMultiTokenPredictorLayer",
    "vllm.model_executor.models.mimo_mtp": "MiMoMultiTokenPredictorLayer",
}


def without_the_mask(function: FunctionType) -> FunctionType:
    """`function` recompiled from its source without the masking statement and its comment."""
    source = textwrap.dedent(inspect.getsource(function))
    kept = [line for line in source.splitlines() if line.strip() not in (MASK_STATEMENT, MASK_COMMENT)]
    if len(kept) != len(source.splitlines()) - 2:
        raise RuntimeError(f"{function.__qualname__}: the position-0 mask is not where the finding says")
    namespace = {}
    exec(compile("\n".join(kept), inspect.getsourcefile(function), "exec"), function.__globals__, namespace)
    return namespace[function.__name__]


def patch_layer(class_name: str) -> Callable[[ModuleType], None]:
    def patch(module: ModuleType) -> None:
        layer = getattr(module, class_name)
        layer.forward = without_the_mask(layer.forward)

    return patch


PATCHES = {module: patch_layer(class_name) for module, class_name in LAYERS.items()}
