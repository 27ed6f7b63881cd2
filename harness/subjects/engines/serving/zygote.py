"""An engine server's zygote: one process that imports the engine once and forks a server for each engine start.

Run by the engine environment's Python as `python zygote.py SERVER PRELOAD` (harness/subjects/engines/forked.py starts
it), standard library only. It does what `python SERVER` does before the server reads its configuration (SERVER's
folder first on sys.path, SERVER's module code), then SERVER's `prepare_process(PRELOAD)`, which sets what must be set
before the engine is imported and imports it (vLLM: 8 to 12 s of a 14 s start on 2 cores). Then, for each start the
harness asks for, it forks: the child takes the three file descriptors the harness sent (stdin, stdout, the log as
stderr) and runs SERVER as `__main__`, exactly as `python SERVER` would from there, in a copy of this process made
after the import and before anything of an engine was built.

Nothing of what the engine computes depends on which process imported it: the zygote is keyed by everything that
reaches the engine's process before its configuration (the Python, SERVER, the environment variables, PRELOAD), and
forks before any engine exists. The harness's test (tests/test_forked_engines.py) decodes the same requests in a
forked server and a fresh one and compares them.

Its channel is a Unix socket on fd 0; each request is one JSON line with three file descriptors (SCM_RIGHTS), each reply
one JSON line: `{"op": "fork"}` -> `{"pid": N}`; `{"op": "status", "pid": N}` -> `{"status": exit status or null}` (a
child that exited is reaped at once, by SIGCHLD, and its status kept). When the harness closes the channel, the zygote
exits; a forked server exits when the harness closes its stdin, as a server started on its own does.
"""

from __future__ import annotations

import atexit
import gc
import json
import os
import runpy
import signal
import socket
import sys
import traceback

MAX_MESSAGE = 65536


def run_server(server: str, fds: list[int]) -> int:
    """In the forked child: stdin, stdout and stderr from `fds`, then SERVER as __main__; its exit status."""
    os.dup2(fds[0], 0)
    os.dup2(fds[1], 1)
    os.dup2(fds[2], 2)
    for fd in fds:
        os.close(fd)
    sys.argv = [server]
    code = 0
    try:
        runpy.run_path(server, run_name="__main__")
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # as Python prints an uncaught exception, then exit status 1
        traceback.print_exc()
        code = 1
    try:
        atexit._run_exitfuncs()  # what an interpreter's exit runs (os._exit below skips it)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return code


def main() -> None:
    server, preload = sys.argv[1], json.loads(sys.argv[2])
    sys.path[0] = os.path.dirname(os.path.abspath(server))  # as `python SERVER` has it
    channel = socket.socket(fileno=0)
    statuses: dict[int, int] = {}

    def reap(*_: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            statuses[pid] = os.waitstatus_to_exitcode(status)

    def reply(message: dict) -> None:
        channel.sendall((json.dumps(message) + "\n").encode())

    try:
        prepare = runpy.run_path(server, run_name="__zygote__").get("prepare_process")
        if prepare is not None:
            prepare(preload)
        # Every object the import made goes to the collector's permanent generation (what vLLM's own freeze_gc_heap
        # does once its engine is built): a forked server's collections then walk only what it makes itself. vLLM
        # collects seven times while it builds an engine; measured on tiny-mimo, 2026-12-07: LLM() 3.9 s forked
        # from an unfrozen zygote, 1.9 s frozen. Collection decides only when unreachable cycles are freed, and
        # what an import made stays reachable from its modules.
        gc.collect()
        gc.freeze()
    except BaseException as error:  # the harness shows it with the zygote's log
        traceback.print_exc()
        reply({"ready": False, "error": f"{type(error).__name__}: {error}"})
        return
    signal.signal(signal.SIGCHLD, reap)
    reply({"ready": True})
    while True:
        data, fds, _flags, _address = socket.recv_fds(channel, MAX_MESSAGE, 3)
        if not data:
            return  # the harness closed the channel
        message = json.loads(data)
        if message.get("op") == "status":
            reap()
            reply({"status": statuses.pop(int(message["pid"]), None)})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            channel.close()
            os._exit(run_server(server, fds))
        for fd in fds:
            os.close(fd)
        reply({"pid": pid})


if __name__ == "__main__":
    main()
