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
from harness.subjects.engines.transformers.environment import ENVIRONMENT, MTP_PROBE

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
    """transformers before 5.20 takes generate(use_mtp=True) and decodes without a draft: the probe must say so."""
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


def test_the_mtp_decoder_refuses_a_checkpoint_transformers_cannot_read_before_any_process(fixture_bundle):
    from harness.subjects.engines.transformers.use_mtp import TransformersMTPUnsupported

    with pytest.raises(TransformersMTPUnsupported, match="no weight mapping for the MiMo layout"):
        ENGINE.build("transformers-mtp", fixture_bundle("tiny-mimo"), EngineOptions(version="5.23.0"))


def test_a_release_without_mtp_generation_refuses_transformers_mtp_instead_of_decoding_without_drafts(
    fixture_bundle, monkeypatch
):
    """What the server runs on a release before 5.20 (5.0.0 takes use_mtp=True and drafts nothing)."""
    from transformers.generation import candidate_generator

    from harness.subjects.engines.transformers.use_mtp import TransformersMTPUnsupported

    monkeypatch.delattr(candidate_generator, "MTPCandidateGenerator")
    with pytest.raises(TransformersMTPUnsupported, match=r"has no MTP generation \(no MTPCandidateGenerator\)"):
        make_decoder("transformers-mtp", fixture_bundle("tiny-deepseek-v3"))
