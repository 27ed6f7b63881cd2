"""A broken harness hook for the tests of the suites on Model Runner V2: with this directory on the vLLM server's
PYTHONPATH, the server's V2 recorder (harness/subjects/engines/vllm/recorder.py RunnerV2Recorder) no longer applies
a forced draft: vLLM drafts its own token where the harness forced another. The harness's other hooks and vLLM are
untouched. Used only by tests/test_vllm_runner_v2.py, in processes it starts."""

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("patch_on_import", Path(__file__).parents[1] / "patch_on_import.py")
_helper = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_helper)

PATCHED_MODULE = "recorder"  # the server imports it from beside server.py


def install(module) -> None:
    module.RunnerV2Recorder.force = lambda self, tokens, idx_mapping, draft_step, draft_logits: None


_helper.patch_on_import(PATCHED_MODULE, install)
