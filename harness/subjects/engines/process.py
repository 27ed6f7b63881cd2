"""An engine server in its own process, spoken to in the wire format (harness/subjects/engines/wire.py).

One process per engine configuration (model, dtype, k, draft mode) lives as long as the decoder that
started it (a pytest session), not one per request; an engine whose decoder asks for it is forked from a zygote that
imported the engine once (forked.py). The server's stderr goes to a log file whose tail is
shown when the engine fails; a crash fails the decode call that was running, and the next call starts a
fresh process.
"""

from __future__ import annotations

import atexit
import collections
import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from harness.contract.decoder import DecodeRequest, DecodeResult
from harness.contract.errors import HarnessError
from harness.subjects.engines import forked, serving
from harness.subjects.engines.serving.server_loop import PROTOCOL
from harness.subjects.engines.wire import EngineProtocolError, parse_result, request_message

# A start that has not answered by then is taken for a hung start: the process is killed and started once more.
STARTUP_TIMEOUT_SECONDS = float(os.environ.get("MTP_HARNESS_ENGINE_START_TIMEOUT", "900"))
# A decode call that takes longer is taken for a hung engine: the process is killed and the call fails.
DECODE_TIMEOUT_SECONDS = float(os.environ.get("MTP_HARNESS_ENGINE_TIMEOUT", "900"))
LOG_TAIL_LINES = 40
STARTING = "the engine to start"


class EngineError(HarnessError):
    """An engine process failed to start, died, or reported an error for a decode call."""


class EngineUnavailable(EngineError):
    """An engine process that never became ready, or stopped answering and was killed at its timeout: nothing it
    computed was seen, so such a failure is never taken for a finding (harness/plugin/known.py)."""


class EngineStartTimeout(EngineUnavailable):
    """An engine process that never answered its start (killed at the start timeout): the pool starts it once more."""


SERVING = Path(serving.__file__).parent  # server_loop.py, for every engine server


def server_environment(env: Mapping[str, str]) -> dict[str, str]:
    """The server process's environment: the harness's, `env` over it, and the servers' shared loop (SERVING) first on
    its PYTHONPATH (it holds server_loop.py alone: nothing of the engine's environment is shadowed)."""
    merged = {**os.environ, **env}
    merged["PYTHONPATH"] = os.pathsep.join(filter(None, [str(SERVING), merged.get("PYTHONPATH")]))
    return merged


class EngineProcess:
    """A running engine server: `decode(requests)` sends one batch and waits for its results."""

    def __init__(
        self,
        python: Path,
        server: Path,
        config: Mapping[str, object],
        env: Mapping[str, str],
        label: str,
        startup_timeout: float = STARTUP_TIMEOUT_SECONDS,
        preload: Mapping[str, object] | None = None,
    ) -> None:
        """preload: where given (and forking is on), the server is forked from the zygote of this Python, server,
        environment and preload (forked.py) instead of started as a process of its own."""
        self.label = label
        self.config = dict(config)
        log_dir = Path(os.environ.get("MTP_HARNESS_ENGINE_LOGS") or Path(tempfile.gettempdir()) / "mtp-harness-engines")
        log_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = log_dir / f"{label}-{os.getpid()}-{time.time_ns()}.log"
        self._log = self.log_path.open("w")
        try:
            if preload is not None and forked.ENABLED:
                zygote_log = self.log_path.with_name(f"zygote-{label}-{os.getpid()}-{time.time_ns()}.log")
                zygote = forked.zygote_for(python, server, server_environment(env), preload, zygote_log)
                self.process: subprocess.Popen | forked.ForkedServer = zygote.fork(self._log)
            else:
                self.process = subprocess.Popen(
                    [str(python), str(server)],
                    stdin=subprocess.PIPE,
                    stdout=subprocess.PIPE,
                    stderr=self._log,
                    text=True,
                    env=server_environment(env),
                )
        except (OSError, forked.ZygoteError) as error:
            raise EngineUnavailable(f"engine {label}: cannot start {python} {server}: {error}") from error
        self._calls = 0
        # the engine's own counters of what it did (configurations.EVIDENCE), summed over calls since the last take
        self.evidence: collections.Counter[str] = collections.Counter()
        try:
            self._send(self.config)
            ready = self._receive(timeout=startup_timeout, waiting_for=STARTING)
        except EngineStartTimeout:
            self.close()
            raise
        except EngineError as error:
            self.close()
            raise EngineUnavailable(str(error)) from error
        except HarnessError:
            self.close()
            raise
        if not ready.get("ready"):
            tail = self.log_tail()
            self.close()
            raise EngineUnavailable(f"engine {label} did not start: {ready.get('error')}\n{tail}")
        if ready.get("protocol") != PROTOCOL:
            self.close()
            raise EngineProtocolError(f"engine {label} speaks protocol {ready.get('protocol')}, the harness {PROTOCOL}")
        self.info: dict = ready.get("engine", {})

    def decode(self, requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        results = self.call("decode", {"requests": [request_message(r) for r in requests]}, f"{len(requests)} requests")
        if not isinstance(results, list) or len(results) != len(requests):
            raise EngineProtocolError(f"engine {self.label}: {len(requests)} requests, results {str(results)[:200]}")
        return [parse_result(result, f"engine {self.label}, request {i}") for i, result in enumerate(results)]

    def call(self, op: str, fields: Mapping[str, object], about: str) -> object:
        """Send one operation (`decode`, or an engine's own, e.g. llama.cpp's `next_token_logprobs`) and return
        the reply's results; an engine error raises EngineError."""
        self._calls += 1
        call = self._calls
        self._send({"op": op, "id": call, **fields})
        waiting_for = f"{op} call {call} ({about})"
        reply = self._receive(timeout=DECODE_TIMEOUT_SECONDS, waiting_for=waiting_for)
        if reply.get("id") != call:
            raise EngineProtocolError(f"engine {self.label}: reply to call {reply.get('id')}, expected {call}")
        self.evidence.update({name: int(value) for name, value in (reply.get("evidence") or {}).items()})
        if "error" in reply:
            if reply.get("fatal"):
                self.close()
            raise EngineError(
                f"engine {self.label} failed {op} call {call}: {reply['error']}\n{reply.get('traceback', '')}"
            )
        return reply.get("results")

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def close(self) -> None:
        if self.alive:
            try:
                self._send({"op": "shutdown"})
                self.process.wait(timeout=30)
            except (OSError, subprocess.TimeoutExpired, EngineError):
                self.process.kill()
                self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()
        self._log.close()

    def log_tail(self) -> str:
        if not self._log.closed:
            self._log.flush()
        lines = self.log_path.read_text(errors="replace").splitlines()[-LOG_TAIL_LINES:]
        return f"last {len(lines)} lines of {self.log_path}:\n" + "\n".join(lines)

    def _send(self, message: Mapping[str, object]) -> None:
        try:
            self.process.stdin.write(json.dumps(message) + "\n")
            self.process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise EngineError(f"engine {self.label} is gone ({error}):\n{self.log_tail()}") from error

    def _receive(self, timeout: float | None, waiting_for: str) -> dict:
        stdout = self.process.stdout
        if timeout is not None:
            with selectors.DefaultSelector() as selector:
                selector.register(stdout, selectors.EVENT_READ)
                if not selector.select(timeout):
                    self.process.kill()
                    hung = EngineStartTimeout if waiting_for == STARTING else EngineUnavailable
                    raise hung(
                        f"engine {self.label}: no answer after {timeout:.0f} s while the harness waited for "
                        f"{waiting_for}; killed it\n{self.log_tail()}"
                    )
        line = stdout.readline()
        if not line:
            code = self.process.wait()
            raise EngineError(
                f"engine {self.label} exited (code {code}) while the harness waited for {waiting_for}\n"
                + self.log_tail()
            )
        try:
            message = json.loads(line)
        except json.JSONDecodeError as error:
            raise EngineProtocolError(f"engine {self.label} wrote a line that is not JSON: {line[:200]!r}") from error
        if not isinstance(message, dict):
            raise EngineProtocolError(f"engine {self.label} wrote {line[:200]!r}, not a JSON object")
        return message


class EnginePool:
    """Engine processes by configuration key, started on first use and closed at exit. At most `max_alive`
    live at once (each holds a model and its KV cache; a vLLM engine of a fixture about 0.9 GB): the least recently
    used one is closed to make room. Eight covers the suites' keys (k = 1..4, greedy and sampled drafts), so that
    no engine is started twice in a run: a start costs about 13 s of CPU (vLLM on CPU; 4 to 6 s forked from its
    zygote)."""

    def __init__(self, max_alive: int = int(os.environ.get("MTP_HARNESS_MAX_ENGINES", "8"))) -> None:
        self.max_alive = max(1, max_alive)
        self._processes: dict[tuple, EngineProcess] = {}  # in order of last use
        self._retired_evidence: collections.Counter[str] = collections.Counter()  # of the engines closed since
        atexit.register(self.close)

    def get(self, key: tuple, start: Callable[[], EngineProcess]) -> EngineProcess:
        process = self._processes.pop(key, None)
        if process is not None and not process.alive:
            self._retire(process)
            process = None
        if process is None:
            while len(self._processes) >= self.max_alive:
                oldest = next(iter(self._processes))
                self._retire(self._processes.pop(oldest))
            try:
                process = start()
            except EngineStartTimeout as hung:  # it never answered: nothing it computed was seen; start it once more
                sys.stderr.write(f"mtp-harness: {str(hung).splitlines()[0]}; starting it once more\n")
                process = start()
        self._processes[key] = process
        return process

    def _retire(self, process: EngineProcess) -> None:
        """Close an engine, keeping the counters it gathered since the last take."""
        process.close()
        self._retired_evidence.update(process.evidence)

    def close(self) -> None:
        for process in self._processes.values():
            self._retire(process)
        self._processes.clear()

    def take_evidence(self) -> dict[str, int]:
        """The engines' counters (configurations.EVIDENCE) summed over every call since the last take, those of
        engines closed in the meantime (the least recently used, or a dead one replaced) included."""
        total, self._retired_evidence = self._retired_evidence, collections.Counter()
        for process in self._processes.values():
            total.update(process.evidence)
            process.evidence.clear()
        return dict(total)
