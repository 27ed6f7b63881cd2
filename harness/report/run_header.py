"""The header of a run's results: who ran what, where and with which versions; its command replays the run."""

from __future__ import annotations

import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from harness.contract.paths import REPO_ROOT
from harness.contract.records import RunHeader


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


def run_header(
    run_id: str, decoder: str, model: Path, device: str, dtype: str, seed: int | None, command: str, workers: int
) -> RunHeader:
    """Who ran what, where and with which versions; `command` replays the run."""
    import torch
    import transformers

    return RunHeader(
        run_id=run_id,
        started=datetime.now(UTC).isoformat(timespec="seconds"),
        session_seed=seed,
        decoder=decoder,
        model=str(model),
        device=device,
        dtype=dtype,
        git_commit=git_commit(),
        mtp_harness=harness_version(),
        torch=torch.__version__,
        transformers=transformers.__version__,
        python=platform.python_version(),
        command=command,
        workers=workers,
    )
