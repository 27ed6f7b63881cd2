"""Engine servers forked from a zygote that imported the engine once (harness/subjects/engines/serving/zygote.py).

A vLLM start spends most of its CPU importing vLLM (8 to 12 s of 14 s on 2 cores), and a run starts an engine for
each k, draft mode and deployed configuration. An engine that asks for it (its decoder's `server_preload`) is started
from a zygote instead: one per Python, server, environment and preload, started on the first such start and closed at
exit, which forks a server for each start. A forked server is driven as a started one is (process.py's EngineProcess):
its stdin and stdout are pipes of the harness, its stderr the engine's log. MTP_HARNESS_ENGINE_FORK=0 starts every
engine as a process of its own.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import socket
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from harness.contract.errors import HarnessError

ZYGOTE = Path(__file__).parent / "serving" / "zygote.py"
ENABLED = os.environ.get("MTP_HARNESS_ENGINE_FORK", "1") != "0"
# what pytest changes in the harness's environment from one test to the next (the test's name), which no engine reads:
# left out of a zygote's environment, or each test would start a zygote of its own
PER_TEST_VARIABLES = frozenset({"PYTEST_CURRENT_TEST"})


class ZygoteError(HarnessError):
    """A zygote that did not start, or stopped answering."""


class ForkedServer:
    """A server the zygote forked, with what process.py uses of subprocess.Popen: stdin, stdout, poll, wait, kill.
    It is the zygote's child: the zygote reaps it and says its exit status."""

    def __init__(self, zygote: Zygote, pid: int, stdin: IO[str], stdout: IO[str]) -> None:
        self.zygote, self.pid, self.stdin, self.stdout = zygote, pid, stdin, stdout
        self.returncode: int | None = None
        self._pidfd = os.pidfd_open(pid)  # readable once the process has exited

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self._ended()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(f"forked server {self.pid}", timeout or 0)
            self._ended()
        return self.returncode  # type: ignore[return-value]

    def kill(self) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):  # it has exited already
                os.kill(self.pid, signal.SIGKILL)

    def _ended(self) -> None:
        """Its exit status from the zygote (-9 when the zygote is gone): the pidfd is readable once the process has
        exited, and the zygote reaps it before it answers."""
        status = self.zygote.status(self.pid)
        self.returncode = status if status is not None else -signal.SIGKILL
        os.close(self._pidfd)


class Zygote:
    """One zygote process: `fork(log)` returns a ForkedServer whose stderr is `log`."""

    def __init__(self, python: Path, server: Path, env: Mapping[str, str], preload: Mapping[str, object], log: Path):
        self._channel, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        self.log_path = log
        with log.open("w") as log_file:
            self.process = subprocess.Popen(
                [str(python), str(ZYGOTE), str(server), json.dumps(dict(preload))],
                stdin=theirs,
                stdout=log_file,
                stderr=log_file,
                env=dict(env),
            )
        theirs.close()
        self._replies = self._channel.makefile("r")
        ready = self._reply("its start")
        if not ready.get("ready"):
            self.close()
            raise ZygoteError(f"the zygote of {server} did not start: {ready.get('error')}\n{self.log_tail()}")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def fork(self, log: IO[str]) -> ForkedServer:
        their_stdin, our_stdin = os.pipe()
        our_stdout, their_stdout = os.pipe()
        try:
            socket.send_fds(self._channel, [b'{"op": "fork"}'], [their_stdin, their_stdout, log.fileno()])
        except OSError as error:
            os.close(our_stdin)
            os.close(our_stdout)
            raise ZygoteError(f"the zygote is gone ({error})\n{self.log_tail()}") from error
        finally:
            os.close(their_stdin)
            os.close(their_stdout)
        pid = int(self._reply("a fork")["pid"])
        return ForkedServer(self, pid, os.fdopen(our_stdin, "w"), os.fdopen(our_stdout, "r"))

    def status(self, pid: int) -> int | None:
        if not self.alive:
            return None
        try:
            self._channel.sendall(json.dumps({"op": "status", "pid": pid}).encode())
            return self._reply("an exit status").get("status")
        except (OSError, ZygoteError):
            return None

    def close(self) -> None:
        self._replies.close()
        self._channel.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])

    def _reply(self, waiting_for: str) -> dict:
        line = self._replies.readline()
        if not line:
            raise ZygoteError(f"the zygote exited while the harness waited for {waiting_for}\n{self.log_tail()}")
        return json.loads(line)


_ZYGOTES: dict[tuple, Zygote] = {}


def zygote_for(python: Path, server: Path, env: Mapping[str, str], preload: Mapping[str, object], log: Path) -> Zygote:
    """The live zygote of this Python, server, environment (the server process's whole environment) and preload,
    started with its log at `log` when there is none."""
    env = {name: value for name, value in env.items() if name not in PER_TEST_VARIABLES}
    key = (str(python), str(server), tuple(sorted(env.items())), json.dumps(dict(preload), sort_keys=True))
    zygote = _ZYGOTES.get(key)
    if zygote is None or not zygote.alive:
        zygote = _ZYGOTES[key] = Zygote(python, server, env, preload, log)
    return zygote


@atexit.register
def close_zygotes() -> None:
    for zygote in _ZYGOTES.values():
        zygote.close()
    _ZYGOTES.clear()
