"""Fix of vllm-drafter-skipped-for-the-whole-batch-near-max-model-len.

`GPUModelRunner._input_fits_in_drafter` skips the drafter for the whole batch (and sends token-0 drafts to
verification) when the batch's longest sequence plus k passes max_model_len. The decision belongs to each
request, and vLLM already makes it there: the drafter clamps the positions of draft steps past max_model_len
and writes no KV cache for them (`eagle_step_update_slot_mapping_and_metadata`, vllm/v1/spec_decode/utils.py),
and the scheduler trims each request's drafts at max_model_len. The fix runs the drafter whenever there is a
batch to draft for, so every request keeps its drafts and its MTP cache.
"""

from types import ModuleType


def _input_fits_in_drafter(self: object, common_attn_metadata: object | None) -> bool:
    # per request, not per batch: positions past max_model_len are clamped and get no KV slot in the drafter,
    # and the scheduler drops the drafts a request has no room for
    return common_attn_metadata is not None


def patch(module: ModuleType) -> None:
    module.GPUModelRunner._input_fits_in_drafter = _input_fits_in_drafter


PATCHES = {"vllm.v1.worker.gpu_model_runner": patch}
