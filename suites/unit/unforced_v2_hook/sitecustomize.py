"""A broken harness hook for the tests of the suites on Model Runner V2: with this directory on the vLLM server's
PYTHONPATH, the server's V2 recorder (harness/subjects/engines/vllm/recorder.py RunnerV2Recorder) no longer applies
a forced draft: vLLM drafts its own token where the harness forced another. The harness's other hooks and vLLM are
untouched. Used only by suites/unit/test_vllm_runner_v2.py, in processes it starts."""

import importlib.abc
import importlib.machinery
import sys

PATCHED_MODULE = "recorder"  # the server imports it from beside server.py


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
            module.RunnerV2Recorder.force = lambda self, tokens, idx_mapping, draft_step, draft_logits: None

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, PatchOnImport())
