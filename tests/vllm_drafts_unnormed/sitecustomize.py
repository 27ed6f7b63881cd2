"""A vLLM whose drafting is wrong and whose tokens are right, made without touching vLLM's files: with this directory
on PYTHONPATH, MiMo's MTP layer (vllm/model_executor/models/mimo_mtp.py, MiMoMultiTokenPredictorLayer) hands the
target's hidden state to its input projection without `hidden_layernorm`, a plausible porting slip. Greedy
verification still commits the target's tokens; only the drafts (and so acceptance) change. The replacement is
installed the moment that module is imported.

Used only by tests/test_vllm_drafting_bug.py, in processes it starts."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("patch_on_import", Path(__file__).parents[1] / "patch_on_import.py")
_helper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helper)

PATCHED_MODULE = "vllm.model_executor.models.mimo_mtp"


def without_the_hidden_norm(module) -> None:
    layer = module.MiMoMultiTokenPredictorLayer
    init = layer.__init__

    def patched_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        self.hidden_layernorm.forward = lambda hidden_states, *_, **__: hidden_states  # its weight still loads

    layer.__init__ = patched_init


_helper.patch_on_import(PATCHED_MODULE, without_the_hidden_norm)
