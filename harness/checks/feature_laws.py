"""The features suite's exact-law cases: MTP-assisted sampling under penalties, min_p, a logit bias, min_tokens or a
structured output's mask must draw the first LAW_LENGTH tokens from the target's law under the same features,

    P(x_1..x_L) = prod_t p(x_t | prompt, x_<t),   p = the processed conditional given the emitted history

(the processors read x_<t: penalties count it, min_tokens counts its length, the constraint's mask follows it). The
law is enumerated on the harness's own copy of the checkpoint with the teacher-forced processors
(harness/checks/feature_cases.py), N requests are sampled through the decoder, and Pearson chi-square and G test the
cells (harness/stats/goodness_of_fit.py). Every p-value of the selected cases is one Holm family at FAMILY_ALPHA; N
comes from the power target at the family's worst level.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from harness.checks.feature_cases import processed_along
from harness.checks.feature_grid import PAIRS, WORDS
from harness.contract.decoder import Decoder, DecodeRequest, DecodeResult, SamplingConfig, StructuredOutput
from harness.contract.seeds import SEED_MODULUS
from harness.decoding.sampling import process_logits
from harness.models.loading import ModelBundle
from harness.stats.goodness_of_fit import GoodnessOfFit, goodness_of_fit
from harness.stats.target_law import OTHER, TargetLaw, enumerate_law

LAW_LENGTH = 2
PRUNE_MASS = 1e-4
CHUNK = 256  # prefixes per teacher-forced forward


@dataclass(frozen=True)
class FeatureLawCase:
    """settings: SamplingConfig keywords; eos_from_plain: output positions of the prompt's plain greedy output whose
    tokens become EOS ids; forced: output position -> token id (adversarial drafts)."""

    id: str
    features: tuple[str, ...]
    prompt_id: str
    settings: dict[str, Any]
    k: int
    draft_mode: str
    eos_from_plain: tuple[int, ...] = ()
    forced: dict[int, int] = field(default_factory=dict)
    structured_output: StructuredOutput | None = None
    n: int = 1  # n > 1: the law of the samples' first tokens, (x_1 of sample 0, x_1 of sample 1), is p_1 x p_1
    sample: int | None = None  # n > 1: this sample's first tokens instead, against the request's own law


def law_cases() -> list[FeatureLawCase]:
    return [
        FeatureLawCase(
            "law-T1.0-repetition-1.5-k2-sample-repetitive-01",
            ("repetition_penalty",),
            "repetitive-01",
            {"temperature": 1.0, "repetition_penalty": 1.5},
            2,
            "sample",
        ),
        FeatureLawCase(
            "law-T1.0-repetition-1.5-k2-greedy-repetitive-01",
            ("repetition_penalty",),
            "repetitive-01",
            {"temperature": 1.0, "repetition_penalty": 1.5},
            2,
            "greedy",
        ),
        FeatureLawCase(
            "law-T1.0-frequency-presence-negative-k2-greedy-repetitive-01",
            ("frequency_penalty", "presence_penalty"),
            "repetitive-01",
            {"temperature": 1.0, "frequency_penalty": -0.7, "presence_penalty": -0.5},
            2,
            "greedy",
        ),
        FeatureLawCase(
            "law-T1.0-frequency-presence-forced-low-k2-sample-natural-02",
            ("frequency_penalty", "presence_penalty"),
            "natural-02",
            {"temperature": 1.0, "frequency_penalty": -1.0, "presence_penalty": -0.5},
            2,
            "sample",
            forced={0: 999, 1: 998},  # rejected drafts the penalties must not count
        ),
        FeatureLawCase(
            "law-T0.8-min-p-0.05-k2-sample-natural-02",
            ("min_p",),
            "natural-02",
            {"temperature": 0.8, "min_p": 0.05},
            2,
            "sample",
        ),
        FeatureLawCase(
            "law-T0.8-min-p-0.05-k2-greedy-natural-02",
            ("min_p",),
            "natural-02",
            {"temperature": 0.8, "min_p": 0.05},
            2,
            "greedy",
        ),
        FeatureLawCase(
            "law-T1.0-logit-bias-k2-greedy-natural-02",
            ("logit_bias",),
            "natural-02",
            {"temperature": 1.0},  # the biases come from the plain output (bias_from_plain)
            2,
            "greedy",
        ),
        FeatureLawCase(
            "law-T1.0-min-tokens-2-forced-eos-k2-greedy-natural-02",
            ("min_tokens",),
            "natural-02",
            {"temperature": 1.0, "min_tokens": 2},
            2,
            "greedy",
            eos_from_plain=(1,),  # the plain output's second token is an EOS, masked for two tokens
        ),
        FeatureLawCase(
            "law-T1.0-grammar-regex-k2-sample-natural-02",
            ("structured_regex",),
            "natural-02",
            {"temperature": 1.0},
            2,
            "sample",  # drafts drawn from the masked q
            structured_output=WORDS,
        ),
        FeatureLawCase(
            "law-T1.0-grammar-gbnf-k2-greedy-code-01",
            ("structured_gbnf",),
            "code-01",
            {"temperature": 1.0},
            2,
            "greedy",
            structured_output=PAIRS,
        ),
        FeatureLawCase(
            "law-T1.0-n-2-k2-greedy-natural-02",
            ("n",),
            "natural-02",
            {"temperature": 1.0},
            2,
            "greedy",
            n=2,  # two samples of one request: each a draw of the target's law, independent of the other
        ),
        FeatureLawCase(
            "law-T1.0-n-3-sample-2-k2-greedy-natural-02",
            ("n",),
            "natural-02",
            {"temperature": 1.0},
            2,
            "greedy",
            n=3,
            sample=2,  # the last of three samples, its first two tokens: drafted, verified, as a request of its own
        ),
    ]


def p_values_per_case() -> int:
    return 2  # chi-square and G


def case_request(
    case: FeatureLawCase, prompt_ids: tuple[int, ...], plain: Sequence[int], eos: Sequence[int]
) -> DecodeRequest:
    """The case's request (seed 0, max_new_tokens LAW_LENGTH) with its settings resolved against the plain output."""
    settings = dict(case.settings)
    if "logit_bias" in case.features:
        settings["logit_bias"] = {plain[0]: -1.5, plain[1]: 1.0}
    extra_eos = tuple(plain[i] for i in case.eos_from_plain)
    forced = dict(case.forced)
    if case.eos_from_plain:
        # the plain output's tokens drafted up to the new EOS, then the EOS itself where min_tokens masks it: a
        # likely run whose last draft must be rejected however often the drafts before it are accepted
        at = case.eos_from_plain[0]
        forced = {position: plain[position] for position in range(at + 1)}
    return DecodeRequest(
        prompt_ids,
        LAW_LENGTH,
        sampling=SamplingConfig(**settings),
        num_draft_tokens=case.k,
        draft_mode=case.draft_mode,  # type: ignore[arg-type]
        eos_token_ids=(*eos, *extra_eos),
        forced_drafts=forced,
        structured_output=case.structured_output,
        n=case.n,
    )


def after_temperature_only(sampling: SamplingConfig) -> SamplingConfig:
    """The settings with the processors before temperature turned off (they are applied already)."""
    return replace(
        sampling, repetition_penalty=1.0, frequency_penalty=0.0, presence_penalty=0.0, logit_bias=(), min_tokens=0
    )


def feature_law(bundle: ModelBundle, request: DecodeRequest) -> TargetLaw:
    """The exact law of the request's first LAW_LENGTH tokens under its features (the module docstring); with n
    samples, of the first tokens of samples 0 and 1: P(a, b) = p_1(a) p_1(b), independent draws."""
    post = after_temperature_only(request.sampling)
    if request.n > 1:
        _, processed = processed_along(bundle, request, [()])
        first = process_logits(processed[:, -1], post).double()[0]
        listed = [(token, float(first[token])) for token in first.nonzero().squeeze(-1).tolist()]
        return enumerate_law(lambda prefixes: [(listed, 0.0)] * len(prefixes), set(), 2, PRUNE_MASS)

    def next_laws(prefixes: Sequence[tuple[int, ...]]) -> Iterable[tuple[Iterable[tuple[int, float]], float]]:
        for start in range(0, len(prefixes), CHUNK):
            chunk = prefixes[start : start + CHUNK]
            _, processed = processed_along(bundle, request, chunk)
            probs = process_logits(processed[:, -1], post).double()
            for row in probs:
                values = row.tolist()
                yield ((token, values[token]) for token in row.nonzero().squeeze(-1).tolist()), 0.0

    return enumerate_law(next_laws, set(request.eos_token_ids), LAW_LENGTH, PRUNE_MASS)


@dataclass(frozen=True)
class FeatureLawOutcome:
    case_id: str
    law: TargetLaw
    fit: GoodnessOfFit


_LAWS: dict[tuple[int, DecodeRequest], TargetLaw] = {}


def run_law_case(
    decoder: Decoder,
    bundle: ModelBundle,
    request: DecodeRequest,
    case_id: str,
    n: int | Callable[[TargetLaw], int],
    seed: int,
    sample: int | None = None,
) -> FeatureLawOutcome:
    """n samples of `request` through the decoder (request i seeded seed + i) against its exact law (memoised); with
    `sample`, that sample of each n-sample request against the one-sample request's law. `n` may be a function of the
    law (harness/stats/power.py law_sample_size)."""
    judged = request if sample is None else replace(request, n=1)
    key = (id(bundle), replace(judged, seed=0))
    if key not in _LAWS:
        _LAWS[key] = feature_law(bundle, judged)
    law = _LAWS[key]
    n = n(law) if callable(n) else n
    requests = [replace(request, seed=(seed + i) % SEED_MODULUS) for i in range(n)]
    cells = [law.cell_of(observed(request, result, sample)) for result in decoder.decode(requests)]
    return FeatureLawOutcome(case_id, law, goodness_of_fit({**law.cells, OTHER: law.other}, cells, OTHER))


def observed(request: DecodeRequest, result: DecodeResult, sample: int | None = None) -> tuple[int, ...]:
    """What a law case's cells read of a result: its tokens; with n samples the first token of samples 0 and 1, or
    sample `sample`'s tokens."""
    if request.n == 1:
        return result.token_ids
    if len(result.samples) != request.n:
        raise AssertionError(f"a request for n = {request.n} samples came back with {len(result.samples)}")
    if sample is not None:
        return result.samples[sample].token_ids
    return tuple(drawn.token_ids[0] for drawn in result.samples[:2])


def seed_of(case_id: str) -> int:
    """Each case's own seeds (moved by the session seed in the suite)."""
    return zlib.crc32(case_id.encode())
