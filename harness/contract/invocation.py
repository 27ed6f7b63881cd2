"""The pytest command line that runs the harness's suites: the same settings, root and node ids whether the
harness is a clone or an installed wheel, and whatever directory the command starts from."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
from collections.abc import Iterable
from pathlib import Path

from harness.contract.paths import DATA_ROOT, INSTALLED, PYTEST_CONFIG


def suites_pytest(paths: Iterable[Path | str], cache: bool = True) -> list[str]:
    """`python -m pytest PATHS` with the suites' own settings (-c) and root (node ids `suites/greedy/...`),
    never those of the caller's directory. With `cache`, an installed harness keeps pytest's cache in the
    caller's directory (`--harness-seed last` reads it) rather than in site-packages; without, no cache."""
    command = [sys.executable, "-m", "pytest", *map(str, paths), "-c", str(PYTEST_CONFIG), f"--rootdir={DATA_ROOT}"]
    if not cache:
        return [*command, "-p", "no:cacheprovider"]
    if INSTALLED:
        command += ["-o", f"cache_dir={Path.cwd() / '.pytest_cache'}"]
    return command


def wait_through_ctrl_c(process: subprocess.Popen) -> int:
    """Wait for pytest; on Ctrl-C keep waiting: pytest got the same SIGINT and writes its partial report
    (subprocess.call would kill it instead). A SIGTERM to this process is handed on to pytest, which stops as on
    Ctrl-C and writes its partial report too."""

    def hand_on(signum: int, frame: object) -> None:
        process.send_signal(signal.SIGTERM)

    previous = signal.signal(signal.SIGTERM, hand_on) if threading.current_thread() is threading.main_thread() else None
    try:
        try:
            return process.wait()
        except KeyboardInterrupt:
            return process.wait()
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
