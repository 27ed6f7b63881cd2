"""Silence transformers' load reports, progress bars and deprecation chatter where the harness expects them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import transformers


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """Errors only, no progress bars: MTP tensors are 'unexpected' to a target class by design, and
    transformers' MTP generation reloads its MtpModel on every call."""
    previous = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    try:
        yield
    finally:
        transformers.logging.set_verbosity(previous)
        transformers.logging.enable_progress_bar()
