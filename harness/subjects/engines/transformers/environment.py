"""transformers' environment for a release other than the harness's own: torch and that transformers release, side
by side with the harness's, and the server script that runs its MTP and assisted generation there.

The pinned release is the harness's own transformers: `--decoder transformers-mtp` without --engine-version runs it in
the harness's process (generation.py); with --engine-version X it runs release X out of process."""

from __future__ import annotations

from importlib.metadata import version as installed_distribution_version
from pathlib import Path

from harness.subjects.engines.environments import EngineEnvironment, Flavour

VERSION = installed_distribution_version("transformers")  # the harness's own release (metadata: no import)
# the release has native MTP generation (generate(use_mtp=True): MTPCandidateGenerator, from 5.20); exit 5
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
        Flavour("cpu", "transformers", VERSION, before=("torch==2.13.0",)),
        Flavour("cuda", "transformers", VERSION, before=("torch",)),
    ),
    probe="import torch, transformers",
    mtp_probe=MTP_PROBE,
)
SERVER = Path(__file__).with_name("server.py")
