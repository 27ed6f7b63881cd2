"""transformers as an engine subject, for any release other than the harness's own: that release in its own
environment (environment.py) runs the in-process subjects' code (harness/subjects/transformers/) behind the wire
protocol (server.py), driven by the decoders in decoder.py. `--decoder transformers-mtp --engine-version X` (or
transformers-assisted) runs release X; without --engine-version, or with the harness's own release, the decoder runs
in the harness's process (`pinned_in_process`).

`ENGINE` is the record the engine registry (harness/subjects/engines/registry.py) reads. No findings: none has been
measured in a transformers release yet, so nothing is excused.

Imports: harness.contract up to harness.subjects.transformers, and harness.subjects.engines' shared modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.contract.run_options import DEFAULT_CONFIGURATION
from harness.subjects.engines.configurations import EngineConfiguration
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.transformers.environment import ENVIRONMENT, SERVER

if TYPE_CHECKING:
    from harness.contract.run_options import EngineOptions
    from harness.models.loading import ModelBundle
    from harness.subjects.engines.decoder import EngineDecoder


def mtp_decoder(engine: Engine, bundle: ModelBundle, speculative: bool, options: EngineOptions) -> EngineDecoder:
    from harness.subjects.engines.transformers.decoder import TransformersReleaseMTPDecoder  # torch: when built

    return TransformersReleaseMTPDecoder(engine, bundle, speculative, options)


def assisted_decoder(engine: Engine, bundle: ModelBundle, speculative: bool, options: EngineOptions) -> EngineDecoder:
    from harness.subjects.engines.transformers.decoder import TransformersReleaseAssistedDecoder

    return TransformersReleaseAssistedDecoder(engine, bundle, speculative, options)


ENGINE = Engine(
    environment=ENVIRONMENT,
    decoders={"transformers-mtp": True, "transformers-assisted": True},
    make_decoder=mtp_decoder,
    decoder_factories={"transformers-assisted": assisted_decoder},
    server=SERVER,
    default_dtypes={"cpu": "float64", "cuda": "bfloat16"},  # as the in-process subjects: float64-exact on CPU
    configurations={DEFAULT_CONFIGURATION: EngineConfiguration(DEFAULT_CONFIGURATION, "transformers' generate")},
    pinned_in_process=True,
)
