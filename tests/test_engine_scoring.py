"""The sampling suite's truth computed inside vLLM's process (--reference engine; harness/subjects/engines/
vllm_scoring.py, harness/checks/engine_reference.py) against the harness's own computation on the same checkpoint:
the first tokens' law of every law case of the grid (the largest difference from the harness's float64 law is
recorded per case), and the whole-sequence statistics' terms, equal to the harness's float32 ones to float32
precision. Needs the vLLM environment (`mtp-harness engine install vllm`; .ci/run installs it)."""

from __future__ import annotations

import numpy as np
import pytest

from harness.checks.engine_reference import EngineReference
from harness.checks.sampling_cases import LAW_LENGTH, PIT_LENGTH, PRUNE_MASS, HarnessScorer, case_grid
from harness.contract.decoder import DecodeRequest, SamplingConfig
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.card import load_card
from harness.models.loading import bundle_for
from harness.models.prompts import load_prompts
from harness.subjects.decoder_registry import make_decoder
from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM

pytestmark = [
    pytest.mark.xdist_group("vllm"),
    pytest.mark.skipif(
        VLLM.installed_version("cpu") is None,
        reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
    ),
]
MODEL = "tiny-mimo"
# the engine's float32 logits against the harness's float64 model: a law's cells agree to ~3e-7 (measured)
LAW_TOLERANCE = 1e-5
LAW_SETTINGS = sorted(
    {(case.prompt_id, case.sampling) for case in case_grid() if case.kind == "law"},
    key=lambda pair: (pair[0], pair[1].temperature, pair[1].top_k),
)


@pytest.fixture(scope="module")
def engine_reference():
    card = load_card(bundle_for(MODEL, "cpu", "float32").path, dtype="float32")
    engine = make_decoder("vllm", card)
    yield EngineReference(engine, card)
    engine.close()


@pytest.fixture(scope="module")
def prompt_ids():
    tokenizer = bundle_for(MODEL, "cpu", "float32").tokenizer
    return {p.id: tuple(p.encode(tokenizer)) for p in load_prompts()}


@pytest.mark.parametrize(
    ("prompt_id", "sampling"),
    LAW_SETTINGS,
    ids=[f"{p}-T{s.temperature}-topk{s.top_k}-topp{s.top_p}" for p, s in LAW_SETTINGS],
)
def test_the_engines_law_is_the_harness_float64_law(engine_reference, prompt_ids, prompt_id, sampling, record_property):
    ours = HarnessScorer(bundle_for(MODEL, "cpu", "float64")).target_law(
        prompt_ids[prompt_id], sampling, LAW_LENGTH, PRUNE_MASS
    )
    theirs = engine_reference.target_law(prompt_ids[prompt_id], sampling, LAW_LENGTH, PRUNE_MASS)
    cells = set(ours.cells) | set(theirs.cells)
    largest = max([abs(ours.cells.get(c, 0.0) - theirs.cells.get(c, 0.0)) for c in cells] + [0.0])
    record_property("largest_law_difference", f"{largest:.3g}")
    record_property("other_difference", f"{abs(ours.other - theirs.other):.3g}")
    # a cell on one side only sits at the prune mass: its probability is within the tolerance of it
    assert largest <= LAW_TOLERANCE and abs(ours.other - theirs.other) <= LAW_TOLERANCE * len(cells)
    assert len(cells) > 1


def test_the_engines_whole_sequence_terms_are_the_harness_float32_terms(engine_reference, prompt_ids):
    """The same continuations scored in vLLM's process and by the harness's float32 copy: the PIT values, the
    centred log-likelihoods, their variances and the summed cumulant tables agree to float32 precision."""
    bundle = bundle_for(MODEL, "cpu", "float32")
    prompt = prompt_ids["natural-03"]
    sampling = SamplingConfig(1.0)
    requests = [DecodeRequest(prompt, PIT_LENGTH, sampling=sampling, seed=i) for i in range(40)]
    continuations = [result.token_ids for result in TargetOnlyDecoder(bundle).decode(requests)]
    theirs = engine_reference.sequence_terms(prompt, continuations, sampling, seed=7)
    ours = HarnessScorer(bundle).sequence_terms(prompt, continuations, sampling, seed=7)
    for name, tolerance in (("u", 1e-5), ("centred", 1e-4), ("variance", 1e-4)):
        a, b = getattr(theirs, name), getattr(ours, name)
        assert np.array_equal(np.isnan(a), np.isnan(b)), name
        assert np.nanmax(np.abs(a - b)) <= tolerance, (name, np.nanmax(np.abs(a - b)))
    summed = ours.sequence_tables.sum(0)
    assert np.abs(theirs.sequence_tables[0] - summed).max() <= 1e-5 * np.abs(summed).max()
