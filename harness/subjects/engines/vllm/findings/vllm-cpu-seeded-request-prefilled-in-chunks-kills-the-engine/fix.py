"""Fix of vllm-cpu-seeded-request-prefilled-in-chunks-kills-the-engine.

A step whose chunk ends inside a request's prompt samples a token that is discarded, and Model Runner V1 undoes
that draw for a seeded request: `GPUModelRunner._bookkeeping_sync` (vllm/v1/worker/gpu_model_runner.py) rewinds its
generator by 4 Philox offsets, `gen.set_offset(gen.get_offset() - 4)`. Offsets are CUDA's: a CPU generator raises
`RuntimeError: CPU Generator does not use offset`, and the engine core dies. The fix keeps the rule (a discarded draw
does not advance the request's randomness) for CPU generators through their state: `_sample` saves the state of the
CPU generator of each request in the discard mask (set by `_prepare_inputs` before sampling) before anything draws,
and `_bookkeeping_sync` runs with those generators out of `input_batch.generators`, so its rewind passes them by,
then puts them back with the saved state. CUDA generators are left to the shipped code.
"""

from collections.abc import Callable
from types import ModuleType

import torch

RUNNER_MODULE = "vllm.v1.worker.gpu_model_runner"


def patch_runner(module: ModuleType) -> None:
    runner = module.GPUModelRunner
    sample: Callable = runner._sample
    bookkeeping_sync: Callable = runner._bookkeeping_sync

    def sample_saving_discarded_cpu_generators(self, *args, **kwargs):  # noqa: ANN001
        generators: dict[int, torch.Generator] = self.input_batch.generators
        discarded = self.discard_request_mask.np[: self.input_batch.num_reqs].nonzero()[0]
        self.fix_discarded_generator_states = {
            int(row): generators[int(row)].get_state()
            for row in discarded
            if int(row) in generators and generators[int(row)].device.type == "cpu"
        }
        return sample(self, *args, **kwargs)

    def bookkeeping_sync_restoring_them(self, *args, **kwargs):  # noqa: ANN001
        saved = getattr(self, "fix_discarded_generator_states", {})
        self.fix_discarded_generator_states = {}
        generators: dict[int, torch.Generator] = self.input_batch.generators
        taken = {row: generators.pop(row) for row in saved}
        try:
            return bookkeeping_sync(self, *args, **kwargs)
        finally:
            for row, generator in taken.items():
                generator.set_state(saved[row])
                generators[row] = generator

    runner._sample = sample_saving_discarded_cpu_generators
    runner._bookkeeping_sync = bookkeeping_sync_restoring_them


PATCHES = {RUNNER_MODULE: patch_runner}
