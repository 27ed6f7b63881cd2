"""A broken vLLM for the failure-triage tests, made without touching vLLM's files: with this directory on
PYTHONPATH, vLLM's CPU greedy verification kernel (vllm/utils/cpu_triton_utils.py,
`_rejection_greedy_sample_kernel_impl`) is replaced by one that commits every draft unverified, plus the
bonus token (the engine-side twin of the harness's `commit-heads-unverified` mutant). The replacement is
installed the moment that module is imported, before vLLM's CPU platform registers the kernel.

Used only by tests/test_vllm_failure_triage.py, in processes it starts."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("patch_on_import", Path(__file__).parents[1] / "patch_on_import.py")
_helper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helper)

PATCHED_MODULE = "vllm.utils.cpu_triton_utils"


def accept_every_draft(
    output_token_ids, cu_num_draft_tokens, draft_token_ids, target_argmax, bonus_token_ids, *_, **__
):
    start = 0
    for row, end in enumerate(cu_num_draft_tokens.tolist()):
        count = end - start
        output_token_ids[row, :count] = draft_token_ids[start:end]
        output_token_ids[row, count] = bonus_token_ids[row]
        start = end


def install(module) -> None:
    module._rejection_greedy_sample_kernel_impl = accept_every_draft


_helper.patch_on_import(PATCHED_MODULE, install)
