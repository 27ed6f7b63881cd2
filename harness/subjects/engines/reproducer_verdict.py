"""A finding's standalone reproducer (its folder's reproducer.py) says its verdict in one line and its exit status:
`BUG REPRODUCED` with exit 1, `not reproduced` with exit 0. Anything else gave no verdict: it could not run on that
release, and the line that says why is kept (a crash's error line, not the debugger's backtrace after it).

Pure functions of what the process printed; harness/commands/matrix.py runs the reproducers."""

from __future__ import annotations

import re
from typing import Any

from harness.subjects.engines.finding_versions import COULD_NOT_RUN, NOT_REPRODUCED, REPRODUCED

VERDICT_LINES = {"BUG REPRODUCED": REPRODUCED, "not reproduced": NOT_REPRODUCED}
EXIT_STATUS = {REPRODUCED: 1, NOT_REPRODUCED: 0}
ERROR_WORDS = re.compile(r"error|exception|assert|abort|segmentation|failed|does not support", re.IGNORECASE)
# what a debugger prints after a native crash (llama.cpp's ggml_abort runs gdb): frames, missing sources, notices
DEBUGGER = re.compile(
    r"^(#\d+ |\d+\s.*: No such file or directory\.$|warning: File .*auto-load|\[Inferior \d|\[New |\[Thread )"
)
LINE_LIMIT = 300


def reproducer_verdict(exit_code: int, stdout: str, stderr: str) -> dict[str, Any]:
    """A reproducer's verdict from what it printed: its last verdict line, with the exit status that goes with it;
    anything else could not run, with the line that says why."""
    said = [line for line in stdout.splitlines() if line.startswith(tuple(VERDICT_LINES))]
    if said:
        verdict = next(v for prefix, v in VERDICT_LINES.items() if said[-1].startswith(prefix))
        if exit_code == EXIT_STATUS[verdict]:
            return {"verdict": verdict, "exit_code": exit_code, "line": said[-1][:LINE_LIMIT]}
    return {"verdict": COULD_NOT_RUN, "exit_code": exit_code, "line": why_it_stopped(exit_code, stderr)}


def why_it_stopped(exit_code: int, stderr: str) -> str:
    """The line that says why a reproducer gave no verdict: the last line of its errors that names an error, an
    assertion or an abort, else its last line (a debugger's backtrace left out)."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip() and not DEBUGGER.match(line.strip())]
    named = [line for line in lines if ERROR_WORDS.search(line)]
    signal = f"killed by signal {-exit_code}: " if exit_code < 0 else ""
    return (signal + (named or lines or ["no output"])[-1])[:LINE_LIMIT]
