"""llama.cpp as an engine subject, everything of it in this package: its environment (environment.py: the xllamacpp
wheel, and where a model directory keeps its GGUF), the decoder the suites drive (decoder.py), the server that runs
inside llama.cpp's environment and imports nothing of the harness (server.py), its deployed configurations
(configurations.py), the bugs found in it (findings.py) and what their failures look like (signatures.py).

`ENGINE` is the record the engine registry (harness/subjects/engines/registry.py) reads. llama.cpp is compiled into
its wheel: no finding's fix can be applied inside its process (no `fixes`), and it scores no sequence for
--reference engine.

Imports: harness.contract up to harness.triage, and harness.subjects.engines' shared modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.subjects.engines.engine import Engine
from harness.subjects.engines.llamacpp.configurations import CONFIGURATIONS
from harness.subjects.engines.llamacpp.environment import ENVIRONMENT, SERVER, missing_gguf
from harness.subjects.engines.llamacpp.findings import FINDINGS

if TYPE_CHECKING:
    from harness.contract.run_options import EngineOptions
    from harness.models.loading import ModelBundle
    from harness.subjects.engines.decoder import EngineDecoder


def make_decoder(engine: Engine, bundle: ModelBundle, speculative: bool, options: EngineOptions) -> EngineDecoder:
    from harness.subjects.engines.llamacpp.decoder import LlamaCppDecoder  # torch: only when a decoder is built

    return LlamaCppDecoder(engine, bundle, speculative, options)


ENGINE = Engine(
    environment=ENVIRONMENT,
    decoders={"llamacpp-mtp": True, "llamacpp": False},
    make_decoder=make_decoder,
    server=SERVER,
    default_dtypes={"cpu": "float32"},  # llama.cpp serves the GGUF's float32 weights on CPU
    configurations=CONFIGURATIONS,
    findings=FINDINGS,
    model_problem=missing_gguf,
)
