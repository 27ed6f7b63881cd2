"""A vLLM whose drafting is wrong and whose tokens are right, made without touching vLLM's files: with this directory
on PYTHONPATH, MiMo's MTP layer (vllm/model_executor/models/mimo_mtp.py, MiMoMultiTokenPredictorLayer) hands the
target's hidden state to its input projection without `hidden_layernorm`, a plausible porting slip. Greedy
verification still commits the target's tokens; only the drafts (and so acceptance) change. The replacement is
installed the moment that module is imported.

Used only by suites/unit/test_vllm_drafting_bug.py, in processes it starts."""

import importlib.abc
import importlib.machinery
import sys

PATCHED_MODULE = "vllm.model_executor.models.mimo_mtp"


def without_the_hidden_norm(module) -> None:
    layer = module.MiMoMultiTokenPredictorLayer
    init = layer.__init__

    def patched_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.hidden_layernorm.forward = lambda hidden_states, *_, **__: hidden_states  # its weight still loads

    layer.__init__ = patched_init


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
            without_the_hidden_norm(module)

        spec.loader.exec_module = exec_and_patch
        return spec


sys.meta_path.insert(0, PatchOnImport())
