"""llama.cpp as an engine subject, everything of it in this package: its environment (environment.py: the xllamacpp
wheel, and where a model directory keeps its GGUF), the decoder the suites drive (decoder.py), the server that runs
inside llama.cpp's environment and imports nothing of the harness (server.py), its deployed configurations
(configurations.py), the bugs found in it (findings/: one folder each, its record, signature, fix patch and
reproducer) and what several of their signatures share (signatures.py).

llama.cpp runs as one of two builds (`--engine-runner`): `source` (the default), built here from the pinned
xllamacpp sdist with the harness's instrumentation compiled in, the findings' fixes under --engine-fixes, and a user's
own patches after them (build.py, with source.py: the sdist; patches/instrumentation.patch), or `wheel`, the published
wheel. It scores no sequence for --reference engine.

`ENGINE` is the record the engine registry (harness/subjects/engines/registry.py) reads.

Imports: harness.contract up to harness.triage, and harness.subjects.engines' shared modules."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from harness.contract.run_options import EngineOptions
from harness.subjects.engines.abilities import FindingReproducers, ModelNeeds, ModelRunners, SourceBuild
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.llamacpp.build import FixesInTheBuild
from harness.subjects.engines.llamacpp.configurations import CONFIGURATIONS
from harness.subjects.engines.llamacpp.environment import (
    DEFAULT_RUNNERS,
    ENVIRONMENT,
    GGUF_FILE,
    RUNNERS,
    SERVER,
    SOURCE,
    WHEEL,
    missing_gguf,
    runner_problem,
)
from harness.subjects.engines.llamacpp.findings import FINDINGS

if TYPE_CHECKING:
    from harness.models.loading import ModelBundle
    from harness.subjects.engines.decoder import EngineDecoder


def make_decoder(engine: Engine, decoder: str, bundle: ModelBundle, options: EngineOptions) -> EngineDecoder:
    from harness.subjects.engines.llamacpp.decoder import LlamaCppDecoder  # torch: only when a decoder is built

    return LlamaCppDecoder(engine, bundle, engine.decoders[decoder], options)


def make_build(options: EngineOptions, log: Callable[[str], None]) -> None:
    """Build llama.cpp from source with the run's patches unless that build exists (build.py); the wheel needs none."""
    from harness.subjects.engines.llamacpp.build import build, build_spec

    if (options.runner or SOURCE) == SOURCE:
        build(build_spec(options.fixes, options.patches), log)


def build_record(options: EngineOptions) -> dict[str, Any] | None:
    """What the run's build of llama.cpp records (build.py: version, patches and their SHA-256, build time); None for
    the wheel, or a build not made yet."""
    from harness.subjects.engines.llamacpp.build import build_info, build_spec

    if (options.runner or SOURCE) != SOURCE:
        return None
    return build_info(build_spec(options.fixes, options.patches))


ENGINE = Engine(
    environment=ENVIRONMENT,
    decoders={"llamacpp-mtp": True, "llamacpp": False},
    make_decoder=make_decoder,
    server=SERVER,
    default_dtypes={"cpu": "float32"},  # llama.cpp serves the GGUF's float32 weights on CPU
    configurations=CONFIGURATIONS,
    findings=FINDINGS,
    abilities=(
        ModelRunners(RUNNERS, DEFAULT_RUNNERS, runner_problem),
        SourceBuild(SOURCE, WHEEL, make_build, build_record),
        FixesInTheBuild(),
        ModelNeeds(missing_gguf),
        # each reproducer serves the GGUF it is given (the model's) with the release's wheel
        FindingReproducers(lambda runner, model: (str(model / GGUF_FILE),)),
    ),
)
