"""Work the pytest-xdist workers of one run share: each piece computed once, by whichever worker claims it first, and
read by the others.

The sampling suite's cases form one family of p-values, corrected together (suites/sampling/conftest.py), so every
case's verdict needs every case's samples. Computed by one worker, the family was the run's critical path: 25 cases,
about 70% of the default run's wall time on one of two cores while the other had finished. Shared, every worker that
reaches a sampling case takes the family's next unclaimed case, computes it and publishes it; then reads the cases the
others computed. The family's p-values, its Holm correction and every verdict are the same as one worker's.

How: the controller makes a private directory (mkdtemp: mode 0700, this user's) for the run and hands its path to
the workers (pytest_configure_node); it removes it at the end. A claim is a file created with O_EXCL (one worker wins)
holding the claimant's pid; a result is written beside it and renamed into place (a reader never sees half a file).
A worker waiting for a piece whose claimant died (the pid is gone, nothing published) claims it again. Results are
pickled: they are this run's own objects, written and read by this run's own processes in a directory only this user
can write. Without xdist (one process) nothing is shared: every piece is computed where it is asked for.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pytest

WORKER_INPUT_KEY = "mtp_harness_shared_work"
SHARED_DIRECTORY = pytest.StashKey[Path]()
POLL_S = 0.05

T = TypeVar("T")


class SharedWork:
    """Pieces of work by key, computed once across the workers of a run (`directory` None: in this process only)."""

    def __init__(self, directory: Path | None, namespace: str) -> None:
        self.directory = directory / namespace if directory is not None else None
        if self.directory is not None:
            self.directory.mkdir(exist_ok=True)

    @classmethod
    def of(cls, config: pytest.Config, namespace: str) -> SharedWork:
        """The run's shared work under `namespace` (a worker's), or work kept in this process (no xdist)."""
        workerinput = getattr(config, "workerinput", None)
        path = workerinput.get(WORKER_INPUT_KEY) if workerinput is not None else None
        return cls(Path(path) if path else None, namespace)

    def compute_all(self, keys: Iterable[str], compute: Callable[[str], T]) -> dict[str, T]:
        """Every key's value: first those nobody has claimed, computed here in `keys`' order (each published as soon as
        it is done), then those the other workers claimed, waited for."""
        keys = list(keys)
        values: dict[str, T] = {}
        for key in keys:
            if self.directory is None or self._claim(key):
                values[key] = self._computed(key, compute)
        for key in keys:
            if key not in values:
                values[key] = self._wait(key, compute)
        return values

    def compute_once(self, key: str, compute: Callable[[str], T]) -> T:
        """One key's value: published already, computed here when unclaimed, else waited for."""
        return self.compute_all([key], compute)[key]

    def _result(self, key: str) -> Path:
        return self.directory / f"{key}.result"

    def _claim(self, key: str) -> bool:
        try:
            descriptor = os.open(self.directory / f"{key}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        except FileExistsError:
            return False
        with os.fdopen(descriptor, "w") as claim:
            claim.write(str(os.getpid()))
        return True

    def _computed(self, key: str, compute: Callable[[str], T]) -> T:
        """compute(key), published; what it raises is published too (the readers raise it: nobody waits forever)."""
        try:
            value = compute(key)
        except BaseException as error:
            self._publish(key, Raised(pickle_safe(error)))
            raise
        self._publish(key, value)
        return value

    def _publish(self, key: str, value: object) -> None:
        if self.directory is not None:
            partial = self.directory / f"{key}.partial"
            partial.write_bytes(pickle.dumps(value))
            os.replace(partial, self._result(key))

    def _wait(self, key: str, compute: Callable[[str], T]) -> T:
        result = self._result(key)
        while not result.exists():
            if not _alive(self._claimant(key)) and not result.exists():
                (self.directory / f"{key}.claim").unlink(missing_ok=True)  # its claimant died: claim it again
                if self._claim(key):
                    return self._computed(key, compute)
            time.sleep(POLL_S)
        value = pickle.loads(result.read_bytes())  # this run's own objects, in its 0700 directory
        if isinstance(value, Raised):
            raise value.error
        return value

    def _claimant(self, key: str) -> int | None:
        with contextlib.suppress(FileNotFoundError, ValueError):
            return int((self.directory / f"{key}.claim").read_text())
        return None  # being written (created, pid not yet there) or being claimed again


@dataclass(frozen=True)
class Raised:
    """What a piece's computation raised, published in its place."""

    error: BaseException


def _alive(pid: int | None) -> bool:
    """Whether a process of this user with that pid runs; None (a claim being written) counts as alive."""
    if pid is None:
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def pickle_safe(error: BaseException) -> BaseException:
    """An error as it can be published: itself when it pickles and unpickles, else a RuntimeError with its text (and
    the same for an error that is not an Exception: the pieces' readers treat Exceptions as values)."""
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:  # any error that cannot travel travels as its text
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001 - xdist WorkerController
    """pytest-xdist's controller: one private directory for the run, handed to every worker."""
    config = node.config
    if SHARED_DIRECTORY not in config.stash:
        config.stash[SHARED_DIRECTORY] = Path(tempfile.mkdtemp(prefix="mtp-harness-shared-"))
    node.workerinput[WORKER_INPUT_KEY] = str(config.stash[SHARED_DIRECTORY])


def pytest_unconfigure(config: pytest.Config) -> None:
    if SHARED_DIRECTORY in config.stash:
        shutil.rmtree(config.stash[SHARED_DIRECTORY], ignore_errors=True)
