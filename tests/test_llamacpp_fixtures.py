"""The GGUF fixtures llama.cpp serves (fixtures/build_gguf.py): built from the committed safetensors, and computing
the same target as the harness. llama.cpp's next-token log-probabilities over the whole vocabulary, at every
position of three prompts, must equal the harness's float64 teacher-forced ones within TOLERANCE. Measured on
2026-12-01: the largest differences were 8.4e-6 (tiny-deepseek-v3), 1.1e-5 (tiny-glm4-moe) and 1.1e-5
(tiny-qwen3-next), from llama.cpp's float32 CPU kernels (f32 KV cache, no flash attention) and the digits of
its JSON; tiny-deepseek-v3 converted without its sigmoid routing differs by 2.6. On 2026-12-07: 6.2e-6
(tiny-deepseek-v3-mla576, YaRN and MLA latent 576) and 8.0e-6 (tiny-qwen3-next-hd64). Needs llama.cpp's environment
for the second test (`mtp-harness engine install llama.cpp`; .ci/run installs it)."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch

from harness.contract.paths import FIXTURE_MODELS
from harness.models.loading import bundle_for
from harness.models.prompts import load_prompts
from harness.models.teacher_forcing import target_forward
from harness.subjects.engines.llamacpp.environment import ENVIRONMENT as LLAMACPP
from harness.subjects.engines.llamacpp.environment import GGUF_FILE, GGUF_MANIFEST, SERVER
from harness.subjects.engines.process import EngineProcess

GGUF_FIXTURES = tuple(sorted(p.name for p in FIXTURE_MODELS.iterdir() if (p / GGUF_FILE).is_file()))
PROMPTS = ("natural-01", "code-02", "repetitive-01")
TOLERANCE = 1e-4  # absolute, on log-probabilities


def sha256(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("fixture", GGUF_FIXTURES)
def test_each_gguf_fixture_is_built_from_the_committed_checkpoint(fixture):
    directory = FIXTURE_MODELS / fixture
    manifest = json.loads((directory / GGUF_MANIFEST).read_text())
    assert manifest["gguf_sha256"] == sha256(directory / GGUF_FILE), "model.gguf is not the one gguf.json records"
    assert manifest["source_sha256"] == sha256(directory / "model.safetensors"), (
        "model.safetensors changed since model.gguf was built: run python fixtures/build_gguf.py"
    )


@pytest.mark.xdist_group("llamacpp")
@pytest.mark.skipif(
    LLAMACPP.installed_version("cpu") is None,
    reason="llama.cpp's environment is not installed: run `mtp-harness engine install llama.cpp` (.ci/run does)",
)
@pytest.mark.parametrize("fixture", GGUF_FIXTURES)
def test_llamacpp_computes_the_harness_target_on_each_gguf_fixture(fixture, record_property):
    bundle = bundle_for(fixture, "cpu", "float64")
    prompts = {p.id: p for p in load_prompts()}
    sequences = [tuple(prompts[name].encode(bundle.tokenizer)) for name in PROMPTS]
    config = {"gguf": str(FIXTURE_MODELS / fixture / GGUF_FILE), "n_ctx": bundle.max_context, "parallel": 1}
    engine = EngineProcess(LLAMACPP.python("cpu"), SERVER, config, {}, f"llamacpp-logprobs-{fixture}")
    try:
        theirs = engine.call(
            "next_token_logprobs", {"prompts": [list(s) for s in sequences], "vocab_size": bundle.vocab_size}, fixture
        )
    finally:
        engine.close()
    largest = 0.0
    for sequence, rows in zip(sequences, theirs, strict=True):
        with torch.no_grad():
            _, logits = target_forward(bundle.target, torch.tensor([sequence]))
        ours = torch.log_softmax(logits[0], dim=-1)
        llama = torch.tensor(rows, dtype=torch.float64)
        assert llama.shape == ours.shape and bool(torch.isfinite(llama).all()), "llama.cpp left tokens out"
        largest = max(largest, float((llama - ours).abs().max()))
    record_property("largest_logprob_difference", f"{largest:.3g}")
    assert largest <= TOLERANCE, f"{fixture}: llama.cpp's log-probabilities differ from the harness's by {largest:.3g}"
