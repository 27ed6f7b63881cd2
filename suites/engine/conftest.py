"""Engine suite: an engine subject under the configurations it is deployed in (prefix-cache hits, prompts prefilled
in chunks, preemption, queueing, asynchronous scheduling, fresh engines, prompt logprobs), held to the promises of
its default configuration: greedy tokens equal to the target-only reference, drafts equal to the checkpoint's MTP
computation from the committed prefix (draft conformance), seeded samples where the engine promises them.

Each configuration must be shown to have happened by the engine's own counters (prefix-cache hits > 0, preemptions
> 0, ...; harness/subjects/engines/configurations.py), never assumed from its settings: a check whose counters did
not move fails. A configuration an engine does not have is skipped with the reason. The harness's own decoder has
no deployed configurations: its analogue, a batch against each request alone, runs in the greedy suite.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence

import pytest

from harness.checks.conformance import Conformance, check_conformance, proposed_drafts
from harness.checks.references import GreedyReference, TargetReference
from harness.contract.decoder import (
    Decoder,
    DecodeRequest,
    DecodeResult,
    SamplingConfig,
    cannot_serve,
    drafter,
    drafter_depths,
)
from harness.contract.records import (
    ConfigurationEvidenceRecord,
    RepeatRecord,
    UnjudgedRecord,
    attach_record,
    request_record,
)
from harness.contract.seeds import session_shifted
from harness.contract.suites import NOT_APPLICABLE
from harness.models.loading import ModelBundle
from harness.models.prompts import Prompt
from harness.subjects.engines.configurations import configuration_names, missing_evidence

ENGINE_K = 2  # drafts per pass in the engine suite: one engine per configuration, chained drafts included


@pytest.fixture(scope="session")
def engine_k() -> int:
    """k of the engine suite's requests."""
    return ENGINE_K


@pytest.fixture(scope="session")
def engine(decoder: Decoder) -> Decoder:
    """The decoder under test, when it is an engine subject with deployed configurations."""
    if not getattr(decoder, "engine_configurations", None):
        pytest.skip(
            f"{NOT_APPLICABLE}decoder {decoder.name!r} has no deployed engine configurations (the harness's own "
            "decoder has none: its analogue, a batch against each request alone, runs in the greedy suite)"
        )
    return decoder


def speculates(decoder: Decoder) -> bool:
    """Whether the engine subject drafts (vllm-mtp, llamacpp-mtp) or is its engine without speculation."""
    return bool(getattr(decoder, "speculative", True))


@pytest.fixture(scope="session")
def speculative_engine(engine: Decoder) -> Decoder:
    """The engine subject, when it speculates: a check with and without speculation needs one that does."""
    if not speculates(engine):
        pytest.skip(f"decoder {engine.name!r} does not speculate: with and without speculation would be one engine")
    return engine


@pytest.fixture(scope="module")
def configured(engine: Decoder) -> Iterator[Callable[..., Decoder]]:
    """configured(name, fresh=False) -> the subject under that deployed configuration, with engines of its own:
    one per configuration for the tests of a module (a fresh one each call with fresh=True), closed after the
    module; skips when the engine has no such configuration."""
    made: dict[str, Decoder] = {}
    fresh_ones: list[Decoder] = []

    def under(name: str, fresh: bool = False) -> Decoder:
        if name not in engine.engine_configurations:
            pytest.skip(
                f"{engine.name} has no {name!r} configuration (its configurations: "
                f"{configuration_names(engine.engine_configurations)})"
            )
        if fresh:
            fresh_ones.append(engine.configured(name))
            return fresh_ones[-1]
        if name not in made:
            made[name] = engine.configured(name)
        return made[name]

    yield under
    for decoder in [*made.values(), *fresh_ones]:
        decoder.close()


@pytest.fixture
def shown(record_property: Callable[[str, object], None]) -> Callable[[Decoder], dict[str, int]]:
    """shown(decoder) -> the engine's own counters since the last take, recorded for the report; fails when a
    counter of the decoder's configuration did not move (the configuration did not happen), and skips when the
    engine's effective setting says it runs without the configuration here (its `switch` is 0)."""

    def check(decoder: Decoder) -> dict[str, int]:
        counters = decoder.take_evidence()
        configuration = decoder.configuration
        if configuration.switch and not counters.get(configuration.switch):
            pytest.skip(
                f"{decoder.name} runs without {configuration.name!r} on this platform and model: the engine's "
                f"effective {configuration.switch} setting is off ({configuration.what})"
            )
        record = ConfigurationEvidenceRecord(
            configuration=configuration.name,
            what=configuration.what,
            evidence=counters,
            required=list(configuration.evidence),
        )
        attach_record(record_property, "configuration_evidence", record)
        missing = missing_evidence(configuration, counters)
        if missing:
            pytest.fail(
                f"configuration {configuration.name!r} did not happen: the engine's counters {missing} stayed at 0 "
                f"(its counters: {counters})",
                pytrace=False,
            )
        return counters

    return check


@pytest.fixture(scope="session")
def engine_prompts(bundle: ModelBundle, prompts: list[Prompt]) -> list[Prompt]:
    """The prompt fixtures clear of the context end (prompt, output and a pass of drafts fit), so that no request
    meets the end of its context: that is the greedy suite's business (and one of vLLM's findings)."""
    chosen = [
        p for p in prompts if len(p.encode(bundle.tokenizer)) + p.max_new_tokens + 2 * ENGINE_K + 2 < bundle.max_context
    ]
    assert len(chosen) >= 8, "too few prompt fixtures clear of the context end"
    return chosen


@pytest.fixture(scope="session")
def long_prompts(bundle: ModelBundle, prompts: list[Prompt]) -> Callable[[str, int, int, int], list[Prompt]]:
    """long_prompts(name, count, tokens, new_tokens) -> `count` prompts of `tokens` tokens each, consecutive stretches
    of the prompt fixtures' text, asking for `new_tokens` tokens."""
    text = [token for p in prompts for token in p.encode(bundle.tokenizer)]

    def made(name: str, count: int, tokens: int, new_tokens: int) -> list[Prompt]:
        assert len(text) >= count * tokens and tokens + new_tokens + 2 * ENGINE_K + 2 < bundle.max_context
        return [
            Prompt(f"{name}-{i}", "long", i, new_tokens, token_ids=tuple(text[i * tokens : (i + 1) * tokens]))
            for i in range(count)
        ]

    return made


@pytest.fixture(scope="session")
def references_of(
    target_reference: TargetReference, greedy_references: dict[str, GreedyReference]
) -> Callable[[Sequence[Prompt]], list[GreedyReference]]:
    """references_of(prompts) -> their target-only greedy references (the prompt fixtures' from the session's,
    others computed)."""

    def of(prompts: Sequence[Prompt]) -> list[GreedyReference]:
        missing = [p for p in prompts if greedy_references.get(p.id) is None or greedy_references[p.id].prompt != p]
        computed = target_reference.greedy(missing) if missing else {}
        return [computed.get(p.id) or greedy_references[p.id] for p in prompts]

    return of


@pytest.fixture
def run_checked(
    bundle: ModelBundle,
    check_tokens: Callable[..., object],
    shown: Callable[[Decoder], dict[str, int]],
    record_property,
) -> Callable[..., tuple[list[DecodeResult], dict[str, int]]]:
    """run_checked(decoder, references, **fields) -> (results, counters): the references' requests decoded as one
    batch under the decoder's configuration, which must show it happened; every output equal to its reference
    (near-ties as the greedy suite classifies them) and, where the decoder reports its passes and drafts with the
    checkpoint's MTP depths, every pass's drafts equal to the checkpoint's MTP computation from its committed
    prefix (a `conformance` record for the findings' signatures)."""

    def run(
        decoder: Decoder, references: Sequence[GreedyReference], **fields: object
    ) -> tuple[list[DecodeResult], dict[str, int]]:
        requests = [reference.request(num_draft_tokens=ENGINE_K, **fields) for reference in references]
        results = decoder.decode(requests)
        counters = shown(decoder)
        for reference, request, result in zip(references, requests, results, strict=True):
            check_tokens(reference, result, request=request)
        if reports_drafts(decoder) and drafter(decoder) == "mtp":  # an engine that stops drafting is no pass
            drafted = proposed_drafts(requests, results)
            assert drafted, f"{decoder.name} proposed no drafts under {decoder.configuration.name!r}"
        conformance = drafts_conform(decoder, bundle, requests, results)
        if conformance is None and reports_drafts(decoder) and drafter(decoder) == "mtp" and not bundle.has_weights:
            why = "it recomputes the drafts with the checkpoint's MTP layers; this run loads no weights (--reference engine)"
            attach_record(record_property, "unjudged", UnjudgedRecord(checks=["draft conformance"], why=why))
        if conformance is not None and conformance.mismatched:
            prompts = [reference.prompt for reference in references]
            attach_record(record_property, "conformance", conformance.record(ENGINE_K, prompts, requests, results))
            pytest.fail(conformance.describe(), pytrace=False)
        return results, counters

    return run


def reports_drafts(decoder: Decoder) -> bool:
    """Whether the decoder speculates and reports its passes' drafts."""
    return speculates(decoder) and cannot_serve(decoder, "steps") is None


def drafts_conform(
    decoder: Decoder, bundle: ModelBundle, requests: Sequence[DecodeRequest], results: Sequence[DecodeResult]
) -> Conformance | None:
    """The draft-conformance check of a greedy decode, or None where it cannot run (no passes reported, drafts not
    from the checkpoint's MTP depths, or no weights in this process: --reference engine)."""
    if not bundle.has_weights or not reports_drafts(decoder) or drafter(decoder) != "mtp":
        return None
    return check_conformance(bundle.with_depths(drafter_depths(decoder)), requests, results)


@pytest.fixture(scope="session")
def sampled_requests(bundle: ModelBundle, harness_seed: int) -> Callable[[Sequence[Prompt]], list[DecodeRequest]]:
    """sampled_requests(prompts) -> one seeded sampled request per prompt (temperature 1, top-p 0.95, greedy drafts,
    16 tokens), each with its prompt's seed shifted by the session seed."""

    def made(prompts: Sequence[Prompt]) -> list[DecodeRequest]:
        return [
            DecodeRequest(
                tuple(p.encode(bundle.tokenizer)),
                16,
                sampling=SamplingConfig(temperature=1.0, top_p=0.95),
                seed=session_shifted(p.seed, harness_seed),
                num_draft_tokens=ENGINE_K,
                eos_token_ids=bundle.eos_token_ids,
            )
            for p in prompts
        ]

    return made


@pytest.fixture
def same_samples(record_property) -> Callable[..., None]:
    """same_samples(requests, first, second, runs): where the engine promises it, each seeded request gives the
    same tokens in both runs; the first request that does not is recorded (`repeat`) and fails."""

    def check(
        requests: Sequence[DecodeRequest],
        first: Sequence[DecodeResult],
        second: Sequence[DecodeResult],
        runs: tuple[str, str],
    ) -> None:
        differ = [i for i, (a, b) in enumerate(zip(first, second, strict=True)) if a.token_ids != b.token_ids]
        if differ:
            i = differ[0]
            record = RepeatRecord(
                request=request_record(requests[i]),
                runs=list(runs),
                first=list(first[i].token_ids),
                second=list(second[i].token_ids),
            )
            attach_record(record_property, "repeat", record)
        assert not differ, (
            f"{len(differ)} of {len(requests)} seeded requests sampled other tokens {runs[1]} than {runs[0]}; "
            f"request {differ[0]}: {list(first[differ[0]].token_ids)} against {list(second[differ[0]].token_ids)}"
        )
        assert len({r.token_ids for r in first}) > 1, "the requests' seeds gave one and the same output"

    return check
