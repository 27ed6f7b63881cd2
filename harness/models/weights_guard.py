"""The promise of `--reference engine`: the harness process reads no weight file, the engine process alone serves the
checkpoint. `forbid_weight_files(why)` makes every way this process could read weights raise `WeightFileOpened`:

- the harness's own safetensors reading (harness/models/checkpoint.py: open_checkpoint and SafetensorsCheckpoint.read,
  which load_bundle goes through before transformers reads a byte);
- safetensors' entry points as later importers see them (`safetensors.safe_open`, `safetensors.torch.load_file`)
  and `torch.load`;
- any Python-level open of a file with a weight suffix (a `sys.addaudithook` hook on the "open" event), which covers
  torch.load's and pickle's reads and any code that reads a weight file by hand.

safetensors' Rust reader opens files below Python's audit events: the wrappers above are what stops it. An audit
hook cannot be removed; the guard is for a whole process (a pytest session under --reference engine, and each of its
pytest-xdist workers)."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from harness.contract.errors import WeightFileOpened

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt", ".gguf")

_forbidden: list[str] = []  # why, once the guard is on


def weights_forbidden() -> str | None:
    """Why this process may read no weight file, or None when it may."""
    return _forbidden[0] if _forbidden else None


def refuse_weights(what: object) -> None:
    """Raise WeightFileOpened naming `what` when this process may read no weight file."""
    if _forbidden:
        raise WeightFileOpened(f"the harness process tried to read {what}: {_forbidden[0]}")


def is_weight_file(path: object) -> bool:
    if isinstance(path, int):
        return False  # a file descriptor
    try:
        name = os.fsdecode(os.fspath(path))  # type: ignore[arg-type]
    except TypeError:
        return False
    return name.lower().endswith(WEIGHT_SUFFIXES)


def forbid_weight_files(why: str) -> None:
    """From now on, any read of a weight file in this process raises WeightFileOpened (idempotent)."""
    if _forbidden:
        return
    _forbidden.append(why)

    def audit(event: str, args: tuple[Any, ...]) -> None:
        if event == "open" and args and is_weight_file(args[0]):
            mode = args[1] if len(args) > 1 and isinstance(args[1], str) else "r"
            if "r" in mode or "+" in mode:
                refuse_weights(args[0])

    sys.addaudithook(audit)
    import safetensors
    import safetensors.torch
    import torch

    safetensors.safe_open = _refusing(safetensors.safe_open)
    safetensors.torch.safe_open = _refusing(safetensors.torch.safe_open)
    safetensors.torch.load_file = _refusing(safetensors.torch.load_file)
    torch.load = _refusing(torch.load)


def _refusing(function: Callable[..., Any]) -> Callable[..., Any]:
    def refused(*args: object, **kwargs: object) -> Any:
        refuse_weights(args[0] if args else kwargs)
        return function(*args, **kwargs)

    refused.__wrapped__ = function  # type: ignore[attr-defined]
    return refused
