"""vLLM's Model Runner V2 as a subject (--engine-runner v2; on this CPU its Triton kernels run in Triton's
interpreter): a greedy slice with forced rejections passes on vLLM as shipped, and the same slice catches the
harness's own V2 hook broken (tests/unforced_v2_hook: the forced draft not applied), so a pass on V2 means the
forced rejections happened where they were forced. Needs the vLLM environment (.ci/run installs it)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM

pytestmark = [
    pytest.mark.xdist_group("vllm"),
    pytest.mark.skipif(
        VLLM.installed_version("cpu") is None,
        reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
    ),
]
SLICE = "natural-01 and k2 and (every-position-separated or last-draft-index-separated)"
UNFORCED = Path(__file__).parent / "unforced_v2_hook"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def v2_run(tmp_path: Path, environment: dict[str, str]) -> dict:
    tmp_path.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "harness.commands.cli", "run", "--suite", "greedy", "--decoder", "vllm-mtp"]
    command += ["--model", "tiny-mimo", "--engine-runner", "v2", "-n", "0", "--report-dir", str(tmp_path)]
    done = subprocess.run(
        [*command, "--", "-k", SLICE], env=environment, capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    [results] = [json.loads(path.read_text()) for path in tmp_path.glob("*/results.json")]
    return results | {"exit_status": done.returncode, "log": done.stdout[-3000:]}


def run_in_vllm_environment(name: str) -> tuple[subprocess.CompletedProcess, list[dict]]:
    """Run a script beside this file with the vLLM environment's Python, one thread: its result and the JSON lines
    it printed."""
    done = subprocess.run(
        [str(VLLM.python("cpu")), str(Path(__file__).with_name(name))],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **ONE_THREAD},
    )
    return done, [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_forced_rejections_on_v2_pass_as_shipped_and_catch_the_hook_that_forces_nothing(tmp_path):
    shipped = v2_run(tmp_path / "shipped", {**os.environ, **ONE_THREAD})
    assert shipped["exit_status"] == 0, shipped["log"]
    assert shipped["run"]["engine_runner"] == "v2" and shipped["run"]["options"]["engine"]["runner"] == "v2"
    outcomes = [case["outcome"] for case in shipped["cases"]]
    assert outcomes == ["passed", "passed"], outcomes
    path = os.pathsep.join(filter(None, [str(UNFORCED), os.environ.get("PYTHONPATH")]))
    broken = v2_run(tmp_path / "unforced", {**os.environ, **ONE_THREAD, "PYTHONPATH": path})
    assert broken["exit_status"] == 1, broken["log"]
    assert [case["outcome"] for case in broken["cases"]] == ["failed", "failed"]
    assert all("rejections at" in case["message"] for case in broken["cases"]), "the pass records show it"


def test_the_cpu_shim_runs_v2s_top_k_top_p_kernel_as_vllms_pytorch_implementation():
    """Without the shim's tensor loop variable the interpreter stops on the kernel ("'int' object has no attribute
    'to'"): every request with top_k or top_p failed on V2 on CPU."""
    done, lines = run_in_vllm_environment("v2_top_k_top_p.py")
    assert done.returncode == 0 and len(lines) == 4, done.stdout[-2000:] + done.stderr[-3000:]
    assert all(line["equal"] for line in lines), lines


def test_the_shims_speed_measures_leave_v2s_tokens_samples_and_acceptance_as_they_were():
    """cpu_triton.interpreter_speed_measures: one V2 engine decodes the same greedy and seeded sampled requests with
    Triton's interpreter as shipped and with the measures (greedy and probabilistic drafts): Triton's Philox bits
    under seven seeds, then equal tokens, log-probabilities and speculative-decoding counters (the seconds each took
    are printed, not judged: speed belongs in benchmarks)."""
    done, lines = run_in_vllm_environment("v2_speed_measures.py")
    assert done.returncode == 0 and len(lines) == 3, done.stdout[-2000:] + done.stderr[-3000:]
    philox, *decodes = lines
    assert philox == {"philox": "randint4x and rand", "seeds": 7, "equal": True}, philox
    assert all(line["equal"] and line["counters"]["vllm:spec_decode_num_drafts"][0] > 0 for line in decodes), lines
