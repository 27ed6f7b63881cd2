"""A rejection-sampler bug of the harness's own making, for the sampling suite on Model Runner V2: with this directory
on the vLLM server's PYTHONPATH, V2's rejection sampler (vllm/v1/worker/gpu/spec_decode/rejection_sampler.py, the
`rejection_sample` it calls) keeps a sampled request's rejected draft as the token it emits in place of the token
resampled from the residual max(0, p - q). Greedy requests (temperature 0) are untouched: their output is the
target's argmax either way. A correct sampler never emits the rejected draft x (the residual's mass at x is 0 when x
was rejected), so the mutant moves mass from p towards q wherever a draft is rejected. Used by
tests/test_vllm_runner_v2.py, in processes it starts."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("patch_on_import", Path(__file__).parents[1] / "patch_on_import.py")
_helper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helper)

PATCHED_MODULE = "vllm.v1.worker.gpu.spec_decode.rejection_sampler"


def install(module) -> None:
    shipped = module.rejection_sample

    def rejection_sample_keeping_the_rejected_draft(target_logits, draft_logits, draft_sampled, cu_num_logits, *args,
                                                    **kwargs):  # fmt: skip
        sampled, num_sampled = shipped(target_logits, draft_logits, draft_sampled, cu_num_logits, *args, **kwargs)
        idx_mapping, temperature = args[1], args[4]  # after cu_num_logits: pos, idx_mapping, expanded_idx_mapping,
        # expanded_local_pos, temperature (rejection_sample's order, as _verify passes them)
        for request in range(num_sampled.shape[0]):
            start, end = int(cu_num_logits[request]), int(cu_num_logits[request + 1])
            rejected_at = int(num_sampled[request]) - 1  # drafts accepted before the first rejection
            drafts = end - start - 1
            if float(temperature[int(idx_mapping[request])]) > 0 and rejected_at < drafts:
                draft = int(draft_sampled[start + rejected_at + 1])
                if draft >= 0:  # -1: a placeholder, not a draft
                    sampled[request, rejected_at] = draft
        return sampled, num_sampled

    module.rejection_sample = rejection_sample_keeping_the_rejected_draft


_helper.patch_on_import(PATCHED_MODULE, install)
