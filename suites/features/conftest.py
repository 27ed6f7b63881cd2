"""The features suite's truth, once per session: each prompt's plain greedy output, the target-only output of every
request (the harness's own target decoder, in the run's dtype) and the processed runner-ups along it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import pytest

from harness.checks.feature_cases import processed_along
from harness.checks.feature_grid import MAX_NEW_TOKENS, PROMPT_IDS
from harness.contract.decoder import Decoder, DecodeRequest, DecodeResult
from harness.contract.features import cannot_serve_features
from harness.decoding.target_decoder import TargetOnlyDecoder
from harness.models.loading import ModelBundle
from harness.models.prompts import Prompt


class FeatureTruth:
    """Target-only results of requests (memoised by request) and the plain greedy output of each prompt."""

    def __init__(self, bundle: ModelBundle, prompts: dict[str, Prompt]) -> None:
        self.bundle = bundle
        self.reference = TargetOnlyDecoder(bundle)
        self.prompts = prompts
        self._results: dict[DecodeRequest, DecodeResult] = {}

    def prompt_ids(self, prompt_id: str) -> tuple[int, ...]:
        return tuple(self.prompts[prompt_id].encode(self.bundle.tokenizer))

    def request(self, prompt_id: str, **fields: object) -> DecodeRequest:
        fields.setdefault("max_new_tokens", MAX_NEW_TOKENS)
        fields.setdefault("eos_token_ids", self.bundle.eos_token_ids)
        return DecodeRequest(self.prompt_ids(prompt_id), **fields)  # type: ignore[arg-type]

    def result(self, request: DecodeRequest) -> DecodeResult:
        """The target-only result of `request` (its drafting fields do not matter)."""
        plain = replace(request, num_draft_tokens=1, draft_mode="greedy", forced_drafts={})
        key = plain  # every field counts (the request's hash covers a few, its equality all)
        if key not in self._results:
            [self._results[key]] = self.reference.decode([plain])
        return self._results[key]

    def plain_output(self, prompt_id: str) -> tuple[int, ...]:
        return self.result(self.request(prompt_id)).token_ids

    def runner_up(self, request: DecodeRequest, output: tuple[int, ...]) -> tuple[int, ...]:
        """The processed runner-up at each position of `output` (the best token other than the output's own)."""
        _, processed = processed_along(self.bundle, request, [output])
        scores = processed[0, : len(output)].clone()
        scores[range(len(output)), list(output)] = float("-inf")
        return tuple(scores.argmax(dim=-1).tolist())


@pytest.fixture(scope="session")
def feature_truth(bundle: ModelBundle, prompts: list[Prompt]) -> FeatureTruth:
    if not bundle.has_weights:
        pytest.skip("the features suite's truth is the harness's own copy of the checkpoint (this run loads none)")
    by_id = {prompt.id: prompt for prompt in prompts}
    missing = [prompt_id for prompt_id in PROMPT_IDS if prompt_id not in by_id]
    if missing:
        pytest.skip(f"the features suite's prompts {missing} are not in this run's prompts file")
    return FeatureTruth(bundle, by_id)


@pytest.fixture
def require_features(decoder: Decoder, require) -> Callable[..., None]:
    """require_features(*features, *capabilities via require): skip where the decoder does not serve them."""

    def needs(*features: str) -> None:
        reason = cannot_serve_features(decoder, features)
        if reason:
            pytest.skip(reason)

    return needs
