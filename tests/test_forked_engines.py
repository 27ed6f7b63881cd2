"""vLLM servers forked from a zygote that imported vLLM once (harness/subjects/engines/forked.py, serving/zygote.py)
decode what servers started as processes of their own decode: the same tokens, passes and sampled outputs, the same
fixes applied (a fix goes in as vLLM is imported, in the zygote)."""

from __future__ import annotations

import pytest

from harness.contract.decoder import DecodeRequest, SamplingConfig
from harness.contract.run_options import EngineOptions
from harness.models.loading import bundle_for
from harness.subjects.decoder_registry import make_decoder
from harness.subjects.engines import forked
from harness.subjects.engines.abilities import FixesOnImport
from harness.subjects.engines.vllm import ENGINE
from harness.subjects.engines.vllm.environment import ENVIRONMENT as VLLM

pytestmark = [
    pytest.mark.xdist_group("vllm"),
    pytest.mark.skipif(
        VLLM.installed_version("cpu") is None,
        reason="the vLLM environment is not installed: run `mtp-harness engine install vllm` (.ci/run does)",
    ),
]
EVERY_FIX = tuple(
    finding.slug for finding in ENGINE.findings if ENGINE.ability(FixesOnImport).fix(finding.slug).is_file()
)
TEXTS = ("The import statement is used to", "def add(a, b):", "Once upon a time")


@pytest.fixture(scope="module")
def bundle():
    return bundle_for("tiny-mimo", "cpu", "float32")


def decoded(bundle, fixes, forking: bool, monkeypatch) -> tuple:
    """The batch's results and the engine's description from a fresh vLLM decoder, its servers forked or not. As
    shipped, the batch is greedy only: a batch with a sampled request reads uninitialised memory in vLLM's CPU expand
    kernel (docs/findings/vllm-cpu-expand-kernel-leaves-sampling-parameters-uninitialized.md), which made two servers
    started alone decode different tokens (measured), so no comparison could hold there."""
    monkeypatch.setattr(forked, "ENABLED", forking)
    prompts = [tuple(bundle.tokenizer.encode(text)) for text in TEXTS]
    batch = [
        DecodeRequest(prompts[0], 16, num_draft_tokens=2),
        DecodeRequest(prompts[1], 16, num_draft_tokens=2, forced_drafts={1: 5, 4: 9}),
        DecodeRequest(prompts[2], 16, sampling=SamplingConfig(1.0, 0, 1.0), seed=7, num_draft_tokens=2),
    ][: 3 if fixes else 2]
    decoder = make_decoder("vllm-mtp", bundle, EngineOptions(runner="v1", fixes=fixes))
    try:
        results = decoder.decode(batch)
        engine = decoder.process((2, "greedy"))
        assert isinstance(engine.process, forked.ForkedServer) == forking
        return results, engine.info
    finally:
        decoder.close()


@pytest.mark.parametrize("fixes", [(), EVERY_FIX], ids=["as-shipped", "every-fix"])
def test_a_forked_vllm_server_decodes_what_a_server_started_alone_decodes(bundle, fixes, monkeypatch):
    alone = decoded(bundle, fixes, False, monkeypatch)
    forked_results = decoded(bundle, fixes, True, monkeypatch)
    assert forked_results == alone
    assert sorted(forked_results[1]["fixes"]) == sorted(fixes)
