"""vLLM as an engine subject, everything of it in this package: its environment (environment.py), the decoder the
suites drive (decoder.py), the server that runs inside vLLM's environment and imports nothing of the harness
(server.py, with recorder.py: forced drafts and per-pass records on Model Runner V1 or V2, cpu_triton.py: what V2
needs to start on a CPU, and scoring.py: the sampling suite's truth computed from vLLM's full logits under
--reference engine), its deployed configurations (configurations.py), the arguments a run may pass through
(arguments.py), the bugs found in it (findings/: one folder each, its record, signature, fix and reproducer), what
several of their signatures share (signatures.py, with drafting.py: vLLM's MTP drafting as three findings describe
it), and triage's vLLM-alone reproducer of a failure group (group_reproducer.py).

`ENGINE` is the record the engine registry (harness/subjects/engines/registry.py) reads.

Imports: harness.contract up to harness.triage, and harness.subjects.engines' shared modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.subjects.engines.abilities import (
    EngineArguments,
    FailureReproducer,
    FindingReproducers,
    FixesOnImport,
    ModelDtypeNeeds,
    ModelRunners,
    OverheadProbe,
    OwnReference,
)
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.vllm.arguments import OWNED_ARGUMENTS, UNSERVED_ARGUMENTS
from harness.subjects.engines.vllm.configurations import CONFIGURATIONS
from harness.subjects.engines.vllm.environment import (
    DEFAULT_RUNNERS,
    ENVIRONMENT,
    FIXES,
    GENERATE_ALONE,
    RUNNERS,
    SERVER,
    model_runner_problem,
)
from harness.subjects.engines.vllm.findings import FINDINGS
from harness.subjects.engines.vllm.group_reproducer import vllm_reproducer_script
from harness.subjects.engines.vllm.model_dtypes import cpu_dtype_problem

if TYPE_CHECKING:
    from harness.contract.run_options import EngineOptions
    from harness.models.loading import ModelBundle
    from harness.subjects.engines.decoder import EngineDecoder


def make_decoder(engine: Engine, decoder: str, bundle: ModelBundle, options: EngineOptions) -> EngineDecoder:
    from harness.subjects.engines.vllm.decoder import VLLMDecoder  # torch: only when a decoder is built

    return VLLMDecoder(engine, bundle, engine.decoders[decoder], options)


ENGINE = Engine(
    environment=ENVIRONMENT,
    decoders={"vllm-mtp": True, "vllm": False},
    make_decoder=make_decoder,
    server=SERVER,
    # vLLM has no float64 path: runs without --dtype use float32 on CPU (bf16 on CUDA, as for every decoder)
    default_dtypes={"cpu": "float32", "cuda": "bfloat16"},
    configurations=CONFIGURATIONS,
    findings=FINDINGS,
    abilities=(
        ModelRunners(RUNNERS, DEFAULT_RUNNERS, model_runner_problem),
        FixesOnImport(FIXES),
        EngineArguments(OWNED_ARGUMENTS, UNSERVED_ARGUMENTS),
        OwnReference(),
        ModelDtypeNeeds(cpu_dtype_problem),
        OverheadProbe(GENERATE_ALONE),
        FailureReproducer(vllm_reproducer_script),
        # each reproducer takes vLLM's model runner (findings/model_runner.py) and decodes the fixture its bug needs
        FindingReproducers(lambda runner, model: ("--runner", runner or DEFAULT_RUNNERS["cpu"])),
    ),
)
