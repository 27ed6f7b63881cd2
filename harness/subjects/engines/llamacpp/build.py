"""llama.cpp built from its source: the pinned xllamacpp sdist (source.py) compiled here with patches applied, into an
environment of its own beside the wheel's.

Every build carries the harness's instrumentation (patches/instrumentation.patch, compiled in): a request may name
forced drafts (`harness_forced_drafts`: output position -> token; the MTP drafter proposes that token there and drafts
on from it) and ask for its verification passes (`harness_passes`: drafts verified, accepted count, emitted tokens,
checkpoint restores, and the MTP drafter's pairings of each batch's first token, in the final response). A request
that asks for neither runs the code as shipped: the patch adds branches taken only for those fields, and a record the
engine never reads (tests/test_llamacpp_build.py compares the build with the wheel on every unforced greedy
case). After it come the fixes of findings (--engine-fixes) and a user's own patches (--engine-patch),
in that order.

Where builds live: the source tree once per version in $MTP_HARNESS_BUILDS (default ~/.cache/mtp-harness/builds), kept
between builds, so a new patch set recompiles only the files its patches touch (xllamacpp's own build applies the
patches from its patches/llama.cpp folder and reverts them afterwards, touching what they changed); each patch set's
environment in the engines folder (environments.py) as `llama.cpp-cpu-<version>-source-<key>`, where the key hashes
the version, the sdist, the build settings and every patch: a built environment is reused for the same patch set.

A build that fails removes what it had made of the environment and names the step that failed: the source, the
patches (which one does not apply), the compilation (the last lines of its log) or the environment.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness.subjects.engines.environments import ENGINE_INFO, EngineEnvironmentError, engines_root
from harness.subjects.engines.llamacpp.environment import SDIST_SHA256, SOURCE, VERSION
from harness.subjects.engines.llamacpp.source import LLAMA_CPP, TOP, sdist_archive

INSTRUMENTATION = Path(__file__).with_name("patches") / "instrumentation.patch"
FINDINGS = Path(__file__).with_name("findings")  # <finding slug>/fix.patch: each llama.cpp finding's documented fix
# llguidance (grammars, in Rust) and BoringSSL (HTTPS for the HTTP client) are fetched from the internet when llama.cpp
# is configured; neither is on a path the harness drives, and the machines it runs on may reach only package registries
CMAKE_ARGS = "-DLLAMA_LLGUIDANCE=OFF -DLLAMA_BUILD_BORINGSSL=OFF"
# the published wheels' portable CPU build (GGML_NATIVE off: the same kernels on every x86-64 machine)
BUILD_ENV = {"XLLAMACPP_RELEASE": "1", "CMAKE_ARGS": CMAKE_ARGS}
ROLES = ("instrumentation", "fix", "user")  # the order patches are applied in


@dataclass(frozen=True)
class SourcePatch:
    """One change to llama.cpp's source: a unified diff relative to thirdparty/llama.cpp (git apply's format)."""

    name: str  # the file's name, or `fix:<slug>` for a finding's fix
    role: str  # one of ROLES
    text: bytes

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text).hexdigest()

    def record(self) -> dict[str, str]:
        return {"name": self.name, "role": self.role, "sha256": self.sha256}


def read_patch(path: Path, role: str = "user", name: str | None = None) -> SourcePatch:
    """A patch file as a SourcePatch; a missing, unreadable or empty file stops here, named."""
    try:
        text = Path(path).read_bytes()
    except OSError as error:
        raise EngineEnvironmentError(f"patch {path}: cannot be read ({error.strerror})") from None
    if not text.strip():
        raise EngineEnvironmentError(f"patch {path}: the file is empty")
    return SourcePatch(name or Path(path).name, role, text)


@dataclass(frozen=True)
class BuildSpec:
    """What a build compiles: the pinned sdist with these patches, in order (the instrumentation first)."""

    patches: tuple[SourcePatch, ...]

    @property
    def key(self) -> str:
        """12 hex digits of SHA-256 over the version, the sdist, the build settings and each patch (role, content)."""
        identity = {
            "version": VERSION,
            "sdist_sha256": SDIST_SHA256,
            "build_env": BUILD_ENV,
            "patches": [(p.role, p.sha256) for p in self.patches],
        }
        return hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:12]

    def record(self) -> dict[str, object]:
        return {"version": VERSION, "sdist_sha256": SDIST_SHA256, "key": self.key, "cmake_args": CMAKE_ARGS,
                "patches": [p.record() for p in self.patches]}  # fmt: skip

    @property
    def home(self) -> Path:
        return engines_root() / f"llama.cpp-cpu-{VERSION}-source-{self.key}"


def fix_patch(slug: str) -> Path:
    """The documented fix of llama.cpp finding `slug` (docs/findings/<slug>.md), as a patch in the finding's folder."""
    return FINDINGS / slug / "fix.patch"


@dataclass(frozen=True)
class FixesInTheBuild:
    """llama.cpp's fixes (--engine-fixes): each finding's fix is a patch to its source, compiled into a build of its
    own (the source runner); nothing is put into its process."""

    def problem(self, slugs: Sequence[str], runner: str | None) -> str | None:
        if runner != SOURCE:
            return (
                f"llama.cpp's fixes are patches compiled into its source: they need its {SOURCE} runner, not {runner}"
            )
        missing = [slug for slug in slugs if not fix_patch(slug).is_file()]
        return f"no fix written yet for {', '.join(missing)}" if missing else None

    def process_environment(self, slugs: Sequence[str]) -> dict[str, str]:
        return {}  # compiled into the build; its record names them to the server


def build_spec(fixes: Sequence[str] = (), user: Sequence[Path | str] = ()) -> BuildSpec:
    """The build of the pinned version with the instrumentation, then the fixes of the findings `fixes` (slugs, in
    order), then the user's patches."""
    patches = [
        read_patch(INSTRUMENTATION, "instrumentation"),
        *(read_patch(fix_patch(slug), "fix", f"fix:{slug}") for slug in fixes),
        *(read_patch(Path(p)) for p in user),
    ]
    return BuildSpec(tuple(patches))


def built_python(spec: BuildSpec) -> Path | None:
    """The Python of the spec's environment, or None when it is not built."""
    return spec.home / "bin" / "python" if (spec.home / ENGINE_INFO).is_file() else None


def build_info(spec: BuildSpec) -> dict[str, object] | None:
    """What the spec's environment records of its build (engine.json), or None when it is not built."""
    info = spec.home / ENGINE_INFO
    return json.loads(info.read_text()) if info.is_file() else None


def builds_root() -> Path:
    return Path(os.environ.get("MTP_HARNESS_BUILDS") or Path.home() / ".cache" / "mtp-harness" / "builds")


def build(spec: BuildSpec, log: Callable[[str], None] = print) -> Path:
    """Build the spec's environment unless it is built; returns its Python. One build at a time per machine (a lock
    on the source tree); a failed build leaves no environment and raises EngineEnvironmentError naming its step."""
    root = builds_root()
    root.mkdir(parents=True, exist_ok=True)
    with _locked(root / f"{TOP}.lock"):
        python = built_python(spec)
        if python is not None:
            log(f"llama.cpp {VERSION} from source, build {spec.key}: already built in {spec.home}")
            return python
        started = time.monotonic()
        log_file = root / f"{TOP}-{spec.key}.log"
        partial = spec.home.with_name(spec.home.name + ".partial")
        step = "source"
        try:
            tree = _source_tree(root)
            step = "patches"
            _check_patches(tree / LLAMA_CPP, spec.patches)
            step = "compilation"
            names = ", ".join(p.name for p in spec.patches)
            log(
                f"llama.cpp {VERSION} from source, build {spec.key}: compiling ({names}; log {log_file}; about 6 "
                "minutes on 2 cores the first time, 2 once the tree is built)"
            )
            wheel = _compile(tree, spec.patches, log_file)
            step = "environment"
            _environment(partial, wheel, log_file)
            info = {
                "engine": "llama.cpp",
                "flavour": "cpu",
                "requirement": f"xllamacpp=={VERSION} (built from source)",
                "version": VERSION,
                "build": spec.record(),
                "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                "install_seconds": round(time.monotonic() - started, 1),
            }
            (partial / ENGINE_INFO).write_text(json.dumps(info, indent=2) + "\n")
            shutil.rmtree(spec.home, ignore_errors=True)
            partial.rename(spec.home)
        except Exception as error:
            shutil.rmtree(partial, ignore_errors=True)
            detail = error if isinstance(error, EngineEnvironmentError) else f"{type(error).__name__}: {error}"
            raise EngineEnvironmentError(
                f"building llama.cpp {VERSION} from source failed at the {step} step: {detail}"
            ) from None
        log(f"llama.cpp {VERSION} from source, build {spec.key}: built in {info['install_seconds']} s: {spec.home}")
        return spec.home / "bin" / "python"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _source_tree(root: Path) -> Path:
    """The sdist extracted once into the builds folder (kept: its build folder makes later builds incremental)."""
    tree = root / TOP
    if (tree / "setup.py").is_file():
        return tree
    staging = Path(tempfile.mkdtemp(dir=root))
    with tarfile.open(sdist_archive()) as sdist:
        sdist.extractall(staging, filter="data")
    (staging / TOP).rename(tree)
    shutil.rmtree(staging)
    return tree


def _git_apply(project: Path, patch: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_CEILING_DIRECTORIES": str(project.parent)}  # never a repository above the tree
    return subprocess.run(["git", "apply", *flags, str(patch)], cwd=project, env=env, capture_output=True, text=True)


def _check_patches(project: Path, patches: Sequence[SourcePatch]) -> None:
    """Each patch applies on the ones before it (applied in turn, then all reverted): one that does not is named."""
    applied: list[Path] = []
    with tempfile.TemporaryDirectory() as scratch:
        try:
            for index, patch in enumerate(patches):
                path = Path(scratch) / f"{index:02d}.patch"
                path.write_bytes(patch.text)
                done = _git_apply(project, path)
                if done.returncode != 0:
                    raise EngineEnvironmentError(
                        f"patch {patch.name} ({patch.role}) does not apply to llama.cpp {VERSION} after "
                        f"{[p.name for p in patches[:index]]}: {done.stderr.strip()}"
                    )
                applied.append(path)
        finally:
            for path in reversed(applied):
                if _git_apply(project, path, "--reverse").returncode != 0:
                    raise EngineEnvironmentError(f"reverting {path.name} left {project} changed: remove it to rebuild")


def _compile(tree: Path, patches: Sequence[SourcePatch], log_file: Path) -> Path:
    """xllamacpp's own build (pip wheel, in the tree) with the patches in its patches/llama.cpp folder; the wheel."""
    folder = tree / "patches" / "llama.cpp"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    for index, patch in enumerate(patches):
        (folder / f"{index:02d}-{patch.role}.patch").write_bytes(patch.text)
    shutil.rmtree(tree / "build", ignore_errors=True)  # setuptools' folder: the extension relinks the new libraries
    dist = Path(tempfile.mkdtemp(dir=tree.parent, prefix="dist-"))
    env = {**os.environ, **BUILD_ENV, "NPROC": str(os.cpu_count() or 2)}
    command = [sys.executable, "-m", "pip", "wheel", "--verbose", "--no-deps", "--wheel-dir", str(dist), str(tree)]
    with log_file.open("w") as out:
        done = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT, check=False)
    wheels = sorted(dist.glob("xllamacpp-*.whl"))
    if done.returncode != 0 or not wheels:
        tail = "\n".join(log_file.read_text(errors="replace").splitlines()[-25:])
        raise EngineEnvironmentError(f"pip wheel exited with {done.returncode}; the end of {log_file}:\n{tail}")
    return wheels[0]


def _environment(home: Path, wheel: Path, log_file: Path) -> None:
    """A fresh virtual environment with the built wheel installed, that imports it."""
    shutil.rmtree(home, ignore_errors=True)
    python = home / "bin" / "python"
    for command in (
        [sys.executable, "-m", "venv", str(home)],
        [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps", str(wheel)],
        [str(python), "-c", "import xllamacpp"],
    ):
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise EngineEnvironmentError(f"`{' '.join(command)}` failed: {(done.stdout + done.stderr).strip()[-2000:]}")
    shutil.rmtree(wheel.parent, ignore_errors=True)
    with log_file.open("a") as out:
        out.write(f"installed {wheel.name} into {home}\n")
