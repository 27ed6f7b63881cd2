"""The header of a run's results: who ran what, where and with which versions; its command replays the run."""

from __future__ import annotations

import platform
import subprocess
from datetime import UTC, datetime

from harness.contract.paths import REPO_ROOT, resolve_model_path
from harness.contract.records import RunHeader
from harness.contract.run_options import RunOptions


def git_commit() -> str | None:
    """The clone's commit; None for an installed harness (its version is in the header)."""
    if REPO_ROOT is None:
        return None
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO_ROOT, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None


def harness_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("mtp-harness")
    except PackageNotFoundError:
        return "unknown"


def run_header(run_id: str, options: RunOptions, command: str, workers: int) -> RunHeader:
    """Who ran what, where and with which versions: the run's options (its session seed resolved), and the command
    that replays it."""
    import torch
    import transformers

    return RunHeader(
        run_id=run_id,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        session_seed=options.seed if isinstance(options.seed, int) else None,
        decoder=options.decoder,
        model=str(resolve_model_path(options.model)),
        device=options.device,
        dtype=options.dtype or "default",
        options=options.to_record(),
        git_commit=git_commit(),
        mtp_harness=harness_version(),
        torch=torch.__version__,
        transformers=transformers.__version__,
        python=platform.python_version(),
        command=command,
        workers=workers,
    )
