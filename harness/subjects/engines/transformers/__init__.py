"""transformers as an engine subject. Its pinned release is the harness's own and runs in the harness's process:
`transformers-mtp` (its native MTP generation) and `transformers-assisted` (its assisted-generation loop with the MTP
depths as the draft model), with forced drafts and verification passes taken from transformers' own loop
(generation.py, candidates.py, use_mtp.py). Any other release runs out of process in its own environment
(environment.py), the same code behind the wire protocol (server.py), driven by the decoders in release.py:
`--decoder transformers-mtp --engine-version X`.

`ENGINE` is the record the engine registry (harness/subjects/engines/registry.py) reads; `PinnedInProcess` names the
in-process decoders; `ReleaseModelNeeds` asks another release, at the door, whether it can serve the model
(model_probe.py). The bugs found in releases are in findings/, one folder each (no fixes: they are not in the pinned
release).

Imports: harness.contract up to harness.triage, and harness.subjects.engines' shared modules."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.contract.run_options import DEFAULT_CONFIGURATION
from harness.subjects.engines.abilities import FindingReproducers, PinnedInProcess, ReleaseModelNeeds
from harness.subjects.engines.configurations import EngineConfiguration
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.transformers.environment import ENVIRONMENT, SERVER, release_mtp_problem
from harness.subjects.engines.transformers.findings import FINDINGS

if TYPE_CHECKING:
    from harness.contract.decoder import Decoder
    from harness.contract.run_options import EngineOptions
    from harness.models.loading import ModelBundle
    from harness.subjects.engines.decoder import EngineDecoder


def in_process_mtp(bundle: ModelBundle) -> Decoder:
    from harness.subjects.engines.transformers.generation import TransformersMTPDecoder  # torch: when built

    return TransformersMTPDecoder(bundle)


def in_process_assisted(bundle: ModelBundle) -> Decoder:
    from harness.subjects.engines.transformers.generation import TransformersAssistedDecoder

    return TransformersAssistedDecoder(bundle)


def make_decoder(engine: Engine, decoder: str, bundle: ModelBundle, options: EngineOptions) -> EngineDecoder:
    from harness.subjects.engines.transformers.release import (  # torch: when built
        TransformersReleaseAssistedDecoder,
        TransformersReleaseMTPDecoder,
    )

    kind = TransformersReleaseAssistedDecoder if decoder == "transformers-assisted" else TransformersReleaseMTPDecoder
    return kind(engine, bundle, True, options)


ENGINE = Engine(
    environment=ENVIRONMENT,
    decoders={"transformers-mtp": True, "transformers-assisted": True},
    make_decoder=make_decoder,
    server=SERVER,
    default_dtypes={"cpu": "float64", "cuda": "bfloat16"},  # as the in-process subjects: float64-exact on CPU
    configurations={DEFAULT_CONFIGURATION: EngineConfiguration(DEFAULT_CONFIGURATION, "transformers' generate")},
    findings=FINDINGS,
    abilities=(
        PinnedInProcess({"transformers-mtp": in_process_mtp, "transformers-assisted": in_process_assisted}),
        ReleaseModelNeeds(release_mtp_problem),
        FindingReproducers(lambda runner, model: (str(model),)),
    ),
)
