"""llama.cpp's environment: the pinned xllamacpp wheel (llama.cpp with its native server, prebuilt for CPU) and
the server script that runs in it, and where a model directory keeps its GGUF."""

from __future__ import annotations

from pathlib import Path

from harness.subjects.engines.environments import EngineEnvironment, Flavour

VERSION = "2026.10.11549"
# the release has speculation type draft-mtp (what server.py asks for); exit 5 (environments.NO_MTP) where it has not
MTP_PROBE = (
    "import sys, xllamacpp\n"
    "types = [n for n in dir(xllamacpp.common_speculative_type) if n.startswith('COMMON_SPECULATIVE_TYPE_')]\n"
    "listed = 'speculative types: ' + ', '.join(types)\n"
    "sys.exit(0 if 'COMMON_SPECULATIVE_TYPE_DRAFT_MTP' in types else print(listed) or 5)\n"
)
# the source distribution of that version: llama.cpp's tree the wheel was built from (its converter builds the
# fixtures' GGUFs, fixtures/build_gguf.py; the findings cite its files)
SDIST_SHA256 = "c17ee1163006f70726abb9f72137830818f3d8cb60bfc34cb232d08428eaa22b"
ENVIRONMENT = EngineEnvironment(
    name="llama.cpp",
    flavours=(Flavour("cpu", "xllamacpp", VERSION),),
    probe="import xllamacpp",
    module="xllamacpp",
    mtp_probe=MTP_PROBE,
)
SERVER = Path(__file__).with_name("server.py")
# llama.cpp's builds a run may choose (--engine-runner)
SOURCE, WHEEL = "source", "wheel"
RUNNERS = {
    SOURCE: "built here from the pinned xllamacpp sdist with the harness's instrumentation compiled in (forced "
    "drafts; pass records in its responses): build.py",
    WHEEL: "the published xllamacpp wheel as installed (pass records parsed from its trace log; no forced drafts)",
}
DEFAULT_RUNNERS = {"cpu": SOURCE}
GGUF_FILE = "model.gguf"  # beside the safetensors checkpoint; the fixtures' are committed
GGUF_MANIFEST = "gguf.json"


def draft_room(context: int, prompt_length: int, start: int, max_new_tokens: int) -> int:
    """The most drafts llama.cpp proposes in a pass starting at output position `start`: its slot's room,
    n_ctx - n_tokens - 2 with n_tokens not yet counting the pass's sampled token (prompt_length + start - 1), and
    n_remaining - 1 = max_new_tokens - start - 1 (tools/server/server-context.cpp:527-531, get_n_draft_max)."""
    return min(context - prompt_length - start - 1, max_new_tokens - start - 1)


def runner_problem(engine: object, flavour: str, runner: str, release: str | None = None) -> str | None:
    """Why llama.cpp's `runner` cannot run here: the wheel's environment (of `release`, else the pinned one) not
    installed (a build from source is made by `mtp-harness run` or `engine install llama.cpp --build` when missing)."""
    if runner == WHEEL and ENVIRONMENT.installed_version(flavour, release) is None:
        version = f" --version {release}" if release is not None else ""
        return f"the xllamacpp wheel is not installed: run `mtp-harness engine install llama.cpp{version}`"
    return None


def gguf_of(model_directory: Path) -> Path | None:
    """The GGUF llama.cpp serves for a model directory: its model.gguf, else its only *.gguf; None if neither."""
    named = model_directory / GGUF_FILE
    if named.is_file():
        return named
    found = sorted(model_directory.glob("*.gguf"))
    return found[0] if len(found) == 1 else None


def missing_gguf(model_directory: Path) -> str | None:
    """Why llama.cpp cannot serve a model directory (no GGUF in it), or None."""
    if gguf_of(model_directory) is not None:
        return None
    return (
        f"{model_directory} has no GGUF for llama.cpp ({GGUF_FILE}, or a single *.gguf); the fixtures' are built by "
        "fixtures/build_gguf.py"
    )
