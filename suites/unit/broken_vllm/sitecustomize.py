"""A broken vLLM for the failure-triage tests, made without touching vLLM's files: with this directory on
PYTHONPATH, vLLM's CPU greedy verification kernel (vllm/utils/cpu_triton_utils.py,
`_rejection_greedy_sample_kernel_impl`) is replaced by one that commits every draft unverified, plus the
bonus token (the engine-side twin of the harness's `commit-heads-unverified` mutant). The replacement is
installed the moment that module is imported, before vLLM's CPU platform registers the kernel.

Used only by suites/unit/test_vllm_failure_triage.py, in processes it starts."""

import importlib.abc
import importlib.machinery
import sys

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


class PatchOnImport(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != PATCHED_MODULE:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        load = spec.loader.exec_module

        def exec_and_patch(module):
            load(module)
            module._rejection_greedy_sample_kernel_impl = accept_every_draft

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, PatchOnImport())
