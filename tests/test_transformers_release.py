"""transformers releases out of process (`--decoder transformers-mtp --engine-version X`): the decoder routes to the
release's environment only for another release, the server there runs the in-process subject's code and returns what
it returns, and a release without MTP generation is named as such."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version as distribution_version
from pathlib import Path

import pytest

from harness.contract.decoder import DecodeRequest, SamplingConfig, drafter, drafts_from
from harness.contract.run_options import EngineOptions
from harness.subjects.decoder_registry import make_decoder
from harness.subjects.engines import transformers as transformers_engine
from harness.subjects.engines.abilities import PinnedInProcess
from harness.subjects.engines.engine import Engine
from harness.subjects.engines.environments import NO_MTP, EngineEnvironment, Flavour
from harness.subjects.engines.registry import engine_of_decoder
from harness.subjects.engines.transformers.environment import (
    ENVIRONMENT,
    MTP_PROBE,
    SERVER_IMPORTS,
    SERVER_NEEDS,
)

PINNED = distribution_version("transformers")
ENGINE = transformers_engine.ENGINE


def test_the_decoders_are_the_engines_only_for_another_release():
    for decoder in ("transformers-mtp", "transformers-assisted"):
        assert engine_of_decoder(decoder) is None  # the pinned release: in the harness's process
        assert engine_of_decoder(decoder, "5.23.0") is ENGINE
        assert engine_of_decoder(decoder, any_release=True) is ENGINE
    assert ENGINE.environment.flavour("cpu").version == PINNED


def run_options(**options):
    from harness.door import RUN, read_run_options

    given = {name.replace("_", "-"): value for name, value in options.items()}
    return read_run_options({"decoder": "transformers-mtp", "model": "tiny-deepseek-v3", **given}, RUN)


def test_the_harness_s_own_release_named_is_the_in_process_run():
    assert run_options(engine_version=PINNED) == run_options()
    assert run_options(engine_version=PINNED).engine.version is None


def test_a_release_not_installed_stops_at_the_door_naming_the_install(tmp_path, monkeypatch):
    from harness.door import UsageError

    monkeypatch.setenv("MTP_HARNESS_ENGINES", str(tmp_path))
    with pytest.raises(UsageError) as error:
        run_options(engine_version="5.23.0")
    assert str(error.value) == (
        "--engine-version 5.23.0: the transformers cpu environment of that release is not installed; run "
        "`mtp-harness engine install transformers --flavour cpu --version 5.23.0`"
    )


def test_a_release_without_mtp_generation_is_named_by_its_probe(tmp_path):
    """transformers before 5.14 takes generate(use_mtp=True) and decodes without a draft: the probe must say so."""
    fake = tmp_path / "transformers"
    (fake / "generation").mkdir(parents=True)
    (fake / "__init__.py").write_text("__version__ = '5.0.0'\n")
    (fake / "generation" / "__init__.py").write_text("")
    (fake / "generation" / "candidate_generator.py").write_text("class AssistedCandidateGenerator: pass\n")
    done = subprocess.run(
        [sys.executable, "-c", MTP_PROBE], env={"PYTHONPATH": str(tmp_path)}, capture_output=True, text=True
    )
    assert (done.returncode, done.stdout.strip()) == (NO_MTP, "transformers 5.0.0 has no MTPCandidateGenerator")
    assert subprocess.run([sys.executable, "-c", MTP_PROBE]).returncode == 0  # the harness's own has it


# each third-party distribution a harness module imports while the server's harness modules load, by its importer
TRACE_HARNESS_IMPORTS = """
import builtins, importlib.metadata, json, sys
real_import, found = builtins.__import__, set()
def traced(name, globals=None, locals=None, fromlist=(), level=0):
    importer = (globals or {}).get("__name__") or ""
    if level == 0 and importer.split(".")[0] == "harness":
        found.add(name.split(".")[0])
    return real_import(name, globals, locals, fromlist, level)
builtins.__import__ = traced
for module in sys.argv[1:]:
    __import__(module)
distributions = importlib.metadata.packages_distributions()
print(json.dumps(sorted({d for top in found for d in distributions.get(top, ())})))
"""


def requirement_name(requirement: str) -> str:
    return requirement.split(";")[0].split("[")[0].split("=")[0].split("<")[0].split(">")[0].strip().lower()


def test_a_release_environment_holds_every_distribution_the_server_s_harness_modules_import():
    """The server imports the harness's package in the release's environment, where only torch, that transformers
    (and what it requires) and SERVER_NEEDS are installed: every third-party module the harness's code imports on the
    way must come from one of them (an import added to the harness without its distribution in SERVER_NEEDS fails
    here; 5.15.0's environment once stopped every case with "No module named 'llguidance'")."""
    import json
    from importlib.metadata import requires

    done = subprocess.run(
        [sys.executable, "-c", TRACE_HARNESS_IMPORTS, *SERVER_IMPORTS], capture_output=True, text=True, check=True
    )
    imported = {name.lower() for name in json.loads(done.stdout)} - {"mtp-harness"}
    transformers_needs = {requirement_name(r) for r in requires("transformers") or () if "extra ==" not in r}
    installed = {"torch", "transformers"} | transformers_needs | {requirement_name(r) for r in SERVER_NEEDS}
    assert imported, "the trace saw no import: it traces nothing"
    assert imported <= installed, f"not in a release's environment: {sorted(imported - installed)}"
    for flavour in ENVIRONMENT.flavours:
        assert flavour.after == SERVER_NEEDS


def test_an_engine_may_have_several_decoders_that_speculate_and_at_most_one_that_does_not():
    environment = EngineEnvironment("x", (Flavour("cpu", "x", "1.0"),), "import x")
    fields = dict(
        environment=environment,
        make_decoder=ENGINE.make_decoder,
        server=Path("x.py"),
        default_dtypes={},
        configurations=ENGINE.configurations,
    )
    Engine(decoders={"x-a": True, "x-b": True}, **fields)
    with pytest.raises(ValueError, match="at most one that does not"):
        Engine(decoders={"x-a": True, "x": False, "y": False}, **fields)
    with pytest.raises(ValueError, match="an ability listed twice"):
        Engine(decoders={"x-a": True}, abilities=(PinnedInProcess({}), PinnedInProcess({})), **fields)


REQUESTS = (
    DecodeRequest((1, 5, 9, 13), 12, num_draft_tokens=2, forced_drafts={3: 7, 6: 11}),
    DecodeRequest(
        (1, 5, 9, 14), 10, sampling=SamplingConfig(0.8, 20, 0.9), seed=3, num_draft_tokens=1, draft_mode="sample"
    ),
)


@pytest.mark.parametrize("decoder", ["transformers-mtp", "transformers-assisted"])
def test_the_server_returns_what_the_in_process_subject_returns(decoder, fixture_bundle, monkeypatch):
    """The release's server run by the harness's own Python (the pinned release out of process): its tokens and
    verification passes, forced drafts and seeded sampling included, are the in-process subject's."""
    monkeypatch.setenv(ENVIRONMENT.python_override, sys.executable)
    bundle = fixture_bundle("tiny-deepseek-v3")
    in_process = make_decoder(decoder, bundle)
    out_of_process = ENGINE.build(decoder, bundle, EngineOptions())
    try:
        assert out_of_process.name == in_process.name == decoder
        assert out_of_process.serves == in_process.serves
        assert drafts_from(out_of_process) == drafts_from(in_process)
        assert drafter(out_of_process) == drafter(in_process)
        expected = in_process.decode(REQUESTS)
        assert out_of_process.decode(REQUESTS) == expected
        assert any(step.drafts for result in expected for step in result.steps)
        assert out_of_process.engine_version == PINNED
    finally:
        out_of_process.close()


@pytest.fixture
def release_environment(tmp_path, monkeypatch):
    """An environment of transformers "5.23.0" as `engine install --version` leaves it, whose Python is the
    harness's own (so its transformers is the pinned one: what the door measures is that release's answer)."""
    import json

    monkeypatch.setenv("MTP_HARNESS_ENGINES", str(tmp_path))
    home = tmp_path / "transformers-cpu-5.23.0"
    (home / "bin").mkdir(parents=True)
    python = home / "bin" / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    (home / "engine.json").write_text(json.dumps({"engine": "transformers", "flavour": "cpu", "version": "5.23.0"}))
    return "5.23.0"


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("tiny-mimo", f"transformers {PINNED}: its MtpModel has no weight mapping for the MiMo layout"),
        ("tiny-qwen3-next", f"transformers {PINNED} has no MTP for Qwen3NextForCausalLM: its config has no "),
    ],
)
def test_what_a_release_cannot_serve_stops_at_the_door_in_one_line_asked_of_that_release(
    release_environment, model, reason
):
    """The door asks the release's own environment (model_probe.py, no weight loaded) and refuses in one line: a
    refusal inside the engine's server would be reported as every case failed (issue 64: 25 failed, judged cases)."""
    from harness.door import UsageError

    with pytest.raises(UsageError) as error:
        run_options(engine_version=release_environment, model=model)
    said = str(error.value)
    assert said.startswith(f"--model {model}: {reason}") and "\n" not in said
    assert run_options(engine_version=release_environment).engine.version == release_environment  # tiny-deepseek-v3
    assert run_options(engine_version=release_environment, decoder="transformers-assisted", model=model)  # no MTP


def test_a_release_s_model_probe_is_its_own_not_the_harness_s(tmp_path):
    """model_probe.py reads the release it runs in: a release whose config class has no num_mtp_layers for Mellum
    (5.14 to 5.19, measured) refuses tiny-mtp-prefix, which the harness's own release serves."""
    from harness.contract.paths import resolve_model_path
    from harness.subjects.engines.transformers.environment import release_mtp_problem

    model = resolve_model_path("tiny-mtp-prefix")
    assert release_mtp_problem("transformers-mtp", Path(sys.executable), model) is None
    fake = tmp_path / "sitecustomize.py"  # such a release's Mellum config: num_nextn_predict_layers not mapped to it
    fake.write_text(
        "from transformers import MellumConfig\n"
        "MellumConfig.attribute_map = {k: v for k, v in MellumConfig.attribute_map.items() if k != 'num_mtp_layers'}\n"
    )
    python = tmp_path / "python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{tmp_path}" exec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    said = release_mtp_problem("transformers-mtp", python, model)
    assert said is not None and said.startswith(f"transformers {PINNED} has no MTP for MellumForCausalLM")
    assert release_mtp_problem("transformers-assisted", python, model) is None


def test_a_release_without_mtp_generation_refuses_transformers_mtp_instead_of_decoding_without_drafts(
    fixture_bundle, monkeypatch
):
    """What the server runs on a release before 5.14 (5.0.0 takes use_mtp=True and drafts nothing)."""
    from transformers.generation import candidate_generator

    from harness.subjects.engines.transformers.use_mtp import TransformersMTPUnsupported

    bundle = fixture_bundle("tiny-deepseek-v3")  # loaded first: loading imports the modelling code, which needs it
    monkeypatch.delattr(candidate_generator, "MTPCandidateGenerator")
    with pytest.raises(TransformersMTPUnsupported, match=r"has no MTP generation \(no MTPCandidateGenerator\)"):
        make_decoder("transformers-mtp", bundle)
