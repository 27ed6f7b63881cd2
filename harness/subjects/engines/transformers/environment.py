"""transformers' environment for a release other than the harness's own: torch and that transformers release, side
by side with the harness's, and the server script that runs its MTP and assisted generation there.

The pinned release is the harness's own transformers: `--decoder transformers-mtp` without --engine-version runs it in
the harness's process (generation.py); with --engine-version X it runs release X out of process."""

from __future__ import annotations

from importlib.metadata import version as installed_distribution_version
from pathlib import Path

from harness.subjects.engines.environments import NO_MTP, EngineEnvironment, Flavour, run_probe

VERSION = installed_distribution_version("transformers")  # the harness's own release (metadata: no import)
SERVER = Path(__file__).with_name("server.py")
MODEL_PROBE = Path(__file__).with_name("model_probe.py")
MODEL_PROBE_TIMEOUT_S = 300
# the harness's modules the server imports (server.py: TransformersEngine), and the distributions they need beside
# torch and transformers, at the harness's own versions: llguidance (harness/decoding/batch.py, the request features)
# and hypothesis (harness/contract/budget.py). tests/test_transformers_release.py checks that these are all the
# third-party modules those harness modules import; the probe imports them in the release's environment, so an
# environment without one is rebuilt by `engine install` and refused by it when it cannot be built
SERVER_IMPORTS = (
    "harness.models.loading",
    "harness.subjects.engines.transformers.generation",
    "harness.subjects.engines.wire",
)
SERVER_NEEDS = tuple(f"{name}=={installed_distribution_version(name)}" for name in ("llguidance", "hypothesis"))
PROBE = (
    "import runpy, torch, transformers\n"
    f"runpy.run_path({str(SERVER)!r})['import_harness']()\n"  # the harness's package by path, as the server does
    f"import {', '.join(SERVER_IMPORTS)}"
)
# the release has native MTP generation (generate(use_mtp=True): MTPCandidateGenerator, from 5.14.0, measured); exit 5
# (environments.NO_MTP) where it has not. A release before it accepts use_mtp=True and decodes without drafts.
MTP_PROBE = (
    "import sys, transformers\n"
    "try:\n    from transformers.generation.candidate_generator import MTPCandidateGenerator\n"
    "except ImportError:\n"
    "    sys.exit(print(f'transformers {transformers.__version__} has no MTPCandidateGenerator') or 5)\n"
)
ENVIRONMENT = EngineEnvironment(
    name="transformers",
    flavours=(
        # the CPU torch first: transformers does not require torch, and an unpinned torch pulls a CUDA build
        Flavour("cpu", "transformers", VERSION, before=("torch==2.13.0",), after=SERVER_NEEDS),
        Flavour("cuda", "transformers", VERSION, before=("torch",), after=SERVER_NEEDS),
    ),
    probe=PROBE,
    mtp_probe=MTP_PROBE,
)


def release_mtp_problem(decoder: str, python: Path, directory: Path) -> str | None:
    """Why the release whose environment `python` is cannot serve `directory` with `decoder`, asked of that release
    (model_probe.py), or None. transformers-assisted needs no MTP generation: nothing to ask."""
    if decoder != "transformers-mtp":
        return None
    answer = run_probe([str(python), str(MODEL_PROBE), str(directory)], MODEL_PROBE_TIMEOUT_S)
    if answer.status == 0:
        return None
    if answer.status == NO_MTP:
        return answer.said or "the release's model probe said it cannot, without a reason"
    return f"the release's model probe ({MODEL_PROBE.name}) gave no answer: {answer.error}"
