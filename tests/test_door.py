"""Bad input stops at the door: a model that does not exist or does not load, an unknown decoder, dtype or
device, an engine that is not installed. Each gives one line naming the option, exit status 2, before any test
runs, from `mtp-harness run` and from plain pytest alike, each naming the option as that front end spells it
(harness/door/)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import pytest

from harness.contract.paths import DATA_ROOT, FIXTURE_MODELS

MISTAKES = {
    "no-model": (["--model", "/nonexistent"], "--model /nonexistent: no such model directory"),
    "unknown-decoder": (["--decoder", "mpt"], "--decoder mpt: unknown decoder 'mpt'. Did you mean mtp"),
    "unknown-dtype": (["--dtype", "float8"], "--dtype float8: unknown dtype"),
    "unknown-device": (["--device", "tpu"], "--device tpu: "),
    "reference-engine-without-an-engine": (
        ["--reference", "engine"],
        "--reference engine: decoder 'mtp' is not an engine; the engine can be its own reference for vllm-mtp, vllm",
    ),
    "unknown-suite-floor": (["--min-judged", "greddy=3"], "--min-judged greddy=3: unknown suite 'greddy'"),
    "floor-not-a-number": (["--min-judged", "greedy=many"], "--min-judged greedy=many: write SUITE=N"),
    "engine-not-installed": (
        ["--decoder", "vllm-mtp"],
        "--decoder vllm-mtp: the vllm cpu environment is not installed",
    ),
}
ENV = {**os.environ, "MTP_HARNESS_ENGINES": "/nonexistent-engines", "MTP_HARNESS_VLLM_PYTHON": ""}


def run(command):
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=ENV, cwd=DATA_ROOT)
    return done, time.perf_counter() - started


@pytest.mark.parametrize("mistake", MISTAKES)
def test_mtp_harness_run_stops_a_mistake_with_one_line_and_status_2(mistake, record_property):
    options, message = MISTAKES[mistake]
    done, seconds = run([sys.executable, "-m", "harness.commands.cli", "run", *options, "-n", "0"])
    record_property("seconds", f"{seconds:.1f}")
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], (done.returncode, lines[:5])


@pytest.mark.parametrize("mistake", MISTAKES)
def test_plain_pytest_stops_a_mistake_with_one_line_and_status_2(mistake, record_property):
    options, message = MISTAKES[mistake]
    options = [f"--harness-{option[2:]}={value}" for option, value in zip(options[::2], options[1::2], strict=True)]
    message = message.replace("--", "--harness-", 1)
    greedy = str(DATA_ROOT / "suites" / "greedy")
    done, seconds = run([sys.executable, "-m", "pytest", greedy, *options, "-p", "no:cacheprovider", "-q"])
    record_property("seconds", f"{seconds:.1f}")
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and message in lines[0], (done.returncode, lines[:5])
    assert "collected" not in done.stdout and "passed" not in done.stdout, "no test ran"


def test_a_model_directory_that_does_not_load_is_named_with_its_fault(tmp_path):
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text((FIXTURE_MODELS / "tiny-mimo" / "config.json").read_text())
    done, _ = run([sys.executable, "-m", "harness.commands.cli", "run", "--model", str(broken), "-n", "0"])
    lines = (done.stdout + done.stderr).strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "has no model.safetensors" in lines[0], lines[:5]


def test_every_decoder_name_the_door_knows_builds_a_decoder_of_that_name():
    """The door reads the names from the registry without importing a decoder; each name builds its decoder."""
    from harness.subjects.decoder_registry import IN_PROCESS, known_decoders, mutant_names
    from harness.subjects.engines.registry import engine_decoders

    assert known_decoders() == sorted({*IN_PROCESS, *engine_decoders()})
    from harness.subjects.mutant_decoders import MUTANTS

    assert mutant_names() == sorted(f"mutant:{name}" for name in MUTANTS)


def test_an_unknown_or_unimportable_module_factory_is_named_at_the_door():
    from harness.door import UsageError, read_run_options

    with pytest.raises(
        UsageError, match=r"--harness-decoder no_such_module:make: decoder 'no_such_module:make': cannot import"
    ):
        read_run_options({"decoder": "no_such_module:make"})
    with pytest.raises(
        UsageError, match=r"--harness-decoder mutant:no-bonu: unknown decoder .* Did you mean mutant:no-bonus"
    ):
        read_run_options({"decoder": "mutant:no-bonu"})


def test_the_plugin_loads_without_torch_so_the_door_answers_before_torch_is_imported():
    """pytest imports the plugin before any hook runs: torch there (seconds) would come before every door check."""
    probe = "import sys, harness.plugin; print('torch' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, env=ENV)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False", "harness.plugin imports torch: find the import with python -X importtime"


def test_an_engine_that_scores_no_sequence_cannot_be_its_own_reference(door):
    from harness.contract.run_options import Reference
    from harness.door import UsageError

    assert door("reference", "engine", "vllm-mtp") is Reference.ENGINE
    assert door("reference", "harness", "llamacpp-mtp") is Reference.HARNESS
    with pytest.raises(UsageError, match=r"decoder 'llamacpp-mtp' runs llama.cpp, which scores no sequence"):
        door("reference", "engine", "llamacpp-mtp")


def test_a_model_vllm_serves_on_cpu_in_bfloat16_only_is_refused_in_another_dtype(door, monkeypatch):
    """The hybrid (its gated-DeltaNet kernel) and, on a CPU with AMX, the MLA model (the AMX backend's packing) run in
    bfloat16 only on vLLM's CPU build: the door names it and the options that serve it (measured, 2026-12-07)."""
    from harness.contract.run_options import Reference
    from harness.door import UsageError
    from harness.subjects.engines.vllm import model_dtypes

    read = {"dtype": "float32", "reference": Reference.ENGINE}
    with pytest.raises(UsageError, match=r"cannot serve it in float32: its gated-DeltaNet kernel.*--dtype bf16"):
        door("model", "tiny-qwen3-next-hd64", "vllm-mtp", **read)
    assert door("model", "tiny-qwen3-next-hd64", "vllm-mtp", **{**read, "dtype": "bfloat16"}) == "tiny-qwen3-next-hd64"
    monkeypatch.setattr(model_dtypes, "cpu_has_amx", lambda: True)
    with pytest.raises(UsageError, match=r"cannot serve it in float32: on a CPU with AMX its MTP layer's MLA"):
        door("model", "tiny-deepseek-v3-mla576", "vllm-mtp", **read)
    monkeypatch.setattr(model_dtypes, "cpu_has_amx", lambda: False)
    assert door("model", "tiny-deepseek-v3-mla576", "vllm-mtp", **read) == "tiny-deepseek-v3-mla576"
    assert door("model", "tiny-mimo", "vllm-mtp", **read) == "tiny-mimo"


def test_the_pinned_transformers_in_process_is_asked_at_the_door_what_it_cannot_serve(door):
    """transformers-mtp on the harness's own release runs in its process: what that release's MTP generation cannot
    serve is refused at the door, asked in the harness's Python (model_probe.py), as for another release; before, every
    case of the run errored with the same reason (1,223 on tiny-qwen3-next-hd64, 2026-12-07)."""
    from harness.contract.run_options import Reference
    from harness.door import UsageError

    read = {"dtype": "float64", "reference": Reference.HARNESS}
    with pytest.raises(UsageError, match=r"has no MTP for Qwen3NextForCausalLM: its config has no num_mtp_layers"):
        door("model", "tiny-qwen3-next-hd64", "transformers-mtp", **read)
    assert door("model", "tiny-deepseek-v3", "transformers-mtp", **read) == "tiny-deepseek-v3"
    assert door("model", "tiny-qwen3-next-hd64", "transformers-assisted", **read) == "tiny-qwen3-next-hd64"


def test_an_engines_own_arguments_pass_through_as_data_and_the_harness_settings_are_refused(door):
    from harness.door import UsageError

    def arguments(decoder, given):
        return door("engine-arg", given, decoder)

    given = ["quantization=fp8", "gpu_memory_utilization=0.85", "tensor_parallel_size=8", "pipeline_parallel_size=1"]
    assert dict(arguments("vllm-mtp", given)) == {
        "quantization": "fp8",
        "gpu_memory_utilization": 0.85,
        "tensor_parallel_size": 8,
        "pipeline_parallel_size": 1,
    }
    assert arguments("mtp", []) == ()
    refused = {
        "vllm-mtp:dtype=float16": "the harness sets dtype itself",
        "vllm-mtp:enable_prefix_caching=true": "the harness sets enable_prefix_caching itself",
        "vllm-mtp:pipeline_parallel_size=2": "with pipeline_parallel_size > 1 the last stage samples and drafts",
        "vllm-mtp:data_parallel_size=2": "data_parallel_size > 1 runs engines of their own",
        "vllm-mtp:quantization": "write NAME=VALUE",
        "vllm-mtp:a-b=1": "write NAME=VALUE",
        'vllm-mtp:hf_overrides={"x": 1}': "a value is a number, true, false, null or a string",
        "mtp:quantization=fp8": "decoder 'mtp' is not an engine that takes arguments",
        "llamacpp-mtp:quantization=fp8": "decoder 'llamacpp-mtp' is not an engine that takes arguments",
    }
    for given, message in refused.items():
        decoder, option = given.split(":", 1)
        with pytest.raises(UsageError, match=re.escape(f"--harness-engine-arg {option}: {message}")):
            arguments(decoder, ["quantization=fp8", option])  # the message names the one value refused
