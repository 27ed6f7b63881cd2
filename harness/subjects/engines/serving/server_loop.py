"""The main loop of every engine server, run inside the engine's own environment (harness/subjects/engines/wire.py is
the protocol). Standard library only: an engine's environment has no harness installed; the harness puts this file's
folder, which holds nothing else of the harness, on every engine server's PYTHONPATH (process.py), and a server
imports it as `from server_loop import serve`.

A server script calls `serve(start, operations)`: `start(config)` builds its engine from the first stdin line (the
engine configuration, data only); each later line is one operation, answered by `operations[op](engine, message)`,
and the reply carries the engine's counters of that call (`engine.take_evidence()`). An error inside an operation
ends the server (its state is then unknown): the harness starts a fresh one for the next call.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from collections.abc import Callable, Mapping
from typing import Any

PROTOCOL = 1
SHUTDOWN = "shutdown"
DECODE = "decode"


def serve(start: Callable[[dict], Any], operations: Mapping[str, Callable[[Any, dict], object]]) -> None:
    """Answer the harness on stdin/stdout until it sends `shutdown` or closes stdin."""
    reply_stream = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # whatever the engine prints goes to the log (stderr); stdout carries replies only

    def reply(message: dict) -> None:
        reply_stream.write(json.dumps(message) + "\n")

    try:
        engine = start(json.loads(sys.stdin.readline()))
    except Exception as error:  # the harness shows this with the engine's log tail
        reply({"ready": False, "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()})
        return
    reply({"ready": True, "protocol": PROTOCOL, "engine": engine.describe()})
    for line in sys.stdin:
        message = json.loads(line)
        op = message.get("op", DECODE)
        if op == SHUTDOWN:
            break
        try:
            if op not in operations:
                raise ValueError(f"unknown operation {op!r}; this server answers {', '.join(sorted(operations))}")
            results = operations[op](engine, message)
            reply({"id": message.get("id"), "results": results, "evidence": engine.take_evidence()})
        except Exception as error:  # the engine's state after a failed call is unknown: exit, the next call restarts
            error_text = f"{type(error).__name__}: {error}"
            reply({"id": message.get("id"), "error": error_text, "traceback": traceback.format_exc(), "fatal": True})
            break
