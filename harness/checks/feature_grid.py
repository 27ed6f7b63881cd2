"""The features suite's cases: which request features, on which prompts, with which k and forced schedule.

A greedy case's settings are built from the prompt's plain greedy output R (no features), so that every feature
changes what it must: the logit bias bans tokens R emits, min_tokens declares a token R emits early to be an EOS,
a stop sequence is a pair of R's tokens; the structured outputs' constraints force text R never emits. Forced
schedules force the processed runner-up (a rejection) or the output's own token (an acceptance) at chosen positions,
so rejected drafts sit where a penalty, a stop, min_tokens or a constraint must not count them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from harness.contract.decoder import StructuredOutput

# the greedy cases' prompts: prose, code, a repetitive one (penalties bite) and token soup
PROMPT_IDS = ("natural-01", "code-01", "repetitive-01", "soup-01")
MAX_NEW_TOKENS = 24

Settings = dict[str, Any]  # DecodeRequest fields, with "sampling" as SamplingConfig keyword arguments


def _banned(output: Sequence[int], eos: Sequence[int]) -> Settings:
    # bans two tokens R emits and pulls R's first token up (it then repeats where it was second best)
    return {"sampling": {"logit_bias": {output[1]: -100.0, output[4]: -100.0, output[0]: 2.0}}}


def _min_tokens_unmet(output: Sequence[int], eos: Sequence[int]) -> Settings:
    # R's token at 3 becomes an EOS, masked until 12 tokens exist: R's EOS inside the first passes must not end it
    return {"sampling": {"min_tokens": 12}, "eos_token_ids": (*eos, output[3])}


def _min_tokens_met(output: Sequence[int], eos: Sequence[int]) -> Settings:
    # R's token at 9 becomes an EOS after min_tokens 4: it ends the output (the mask has lifted)
    return {"sampling": {"min_tokens": 4}, "eos_token_ids": (*eos, output[9])}


def _min_tokens_at_the_eos(output: Sequence[int], eos: Sequence[int]) -> Settings:
    # R's token at 8 becomes an EOS exactly where min_tokens 8 lifts the mask: a pass that starts before 8 and ends
    # at 8 must mask its earlier positions and not its last (long accepted runs end a pass at 8 at k = 3)
    return {"sampling": {"min_tokens": 8}, "eos_token_ids": (*eos, output[8])}


def _stops(output: Sequence[int], eos: Sequence[int]) -> Settings:
    return {"stop_sequences": ((output[5], output[6]), (output[11],))}


# the constraints: words ending with a period (then only an EOS), a small JSON object (compact, as every JSON schema),
# and key=value pairs in GBNF (llama.cpp's grammar notation); none depends on R, each forces tokens R does not emit
WORDS = StructuredOutput("regex", r"[a-z]+( [a-z]+)*\.")
RECORD = StructuredOutput(
    "json_schema",
    '{"type": "object", "properties": {"name": {"type": "string", "maxLength": 12}, "count": {"type": "integer"}}, '
    '"required": ["name", "count"], "additionalProperties": false}',
)
PAIRS = StructuredOutput("gbnf", 'root ::= pair ("; " pair)* "."\npair ::= [a-z]{1,8} "=" [0-9]{1,3}')


# name -> (the features it exercises, settings from the plain greedy output R and the EOS ids)
GREEDY_SETTINGS: dict[str, tuple[tuple[str, ...], Callable[[Sequence[int], Sequence[int]], Settings]]] = {
    "repetition-1.5": (("repetition_penalty",), lambda r, e: {"sampling": {"repetition_penalty": 1.5}}),
    "repetition-0.6": (("repetition_penalty",), lambda r, e: {"sampling": {"repetition_penalty": 0.6}}),
    "frequency-presence": (
        ("frequency_penalty", "presence_penalty"),
        lambda r, e: {"sampling": {"frequency_penalty": 0.9, "presence_penalty": 0.4}},
    ),
    "frequency-presence-negative": (
        ("frequency_penalty", "presence_penalty"),
        lambda r, e: {"sampling": {"frequency_penalty": -0.7, "presence_penalty": -0.5}},
    ),
    "logit-bias": (("logit_bias",), _banned),
    "min-tokens-unmet": (("min_tokens",), _min_tokens_unmet),
    "min-tokens-met": (("min_tokens",), _min_tokens_met),
    "min-tokens-at-the-eos": (("min_tokens",), _min_tokens_at_the_eos),
    "stop-sequences": (("stop_sequences",), _stops),
    "logprobs-top-5": (("logprobs",), lambda r, e: {"logprobs": 5}),
    "grammar-regex": (("structured_regex",), lambda r, e: {"structured_output": WORDS}),
    "grammar-json": (("structured_json_schema",), lambda r, e: {"structured_output": RECORD}),
    "grammar-gbnf": (("structured_gbnf",), lambda r, e: {"structured_output": PAIRS}),
}

# forced schedules over output positions: "runner-up" forces the processed runner-up there (rejected),
# "own" the output's own token (accepted)
SCHEDULES: dict[str, Callable[[int], str | None]] = {
    "free": lambda position: None,
    "reject-every-3rd": lambda position: "runner-up" if position % 3 == 1 else None,
    "accept-4-reject-1": lambda position: "runner-up" if position % 5 == 4 else "own",
}
# (schedule, k): a free run at k 2, rejections every third position at k 1 and 3, long accepted runs at k 3
SCHEDULE_KS = (("free", 2), ("reject-every-3rd", 1), ("reject-every-3rd", 3), ("accept-4-reject-1", 3))


@dataclass(frozen=True)
class GreedyFeatureCase:
    settings: str
    prompt_id: str
    schedule: str
    k: int

    @property
    def id(self) -> str:
        return f"{self.settings}-{self.schedule}-k{self.k}-{self.prompt_id}"

    @property
    def features(self) -> tuple[str, ...]:
        return GREEDY_SETTINGS[self.settings][0]


def greedy_cases() -> list[GreedyFeatureCase]:
    return [
        GreedyFeatureCase(settings, prompt_id, schedule, k)
        for settings in GREEDY_SETTINGS
        for prompt_id in PROMPT_IDS
        for schedule, k in SCHEDULE_KS
    ]


def forced_schedule(schedule: str, output: Sequence[int], runner_up: Sequence[int]) -> dict[int, int]:
    """The forced drafts of `schedule` along the feature reference `output` and its processed runner-ups."""
    forced = {}
    for position, (own, second) in enumerate(zip(output, runner_up, strict=True)):
        kind = SCHEDULES[schedule](position)
        if kind is not None:
            forced[position] = own if kind == "own" else second
    return forced


@dataclass(frozen=True)
class StopCase:
    """A stop sequence placed, from the decoder's own passes, so that it ends inside a run of accepted drafts
    ("mid-run": tokens the same pass accepted after it must be dropped) or starts in one pass and ends in the
    next ("across-passes")."""

    scenario: str
    prompt_id: str
    k: int

    @property
    def id(self) -> str:
        return f"stop-{self.scenario}-k{self.k}-{self.prompt_id}"


STOP_SCENARIOS = ("mid-run", "across-passes")


def stop_cases() -> list[StopCase]:
    return [StopCase(s, p, k) for s in STOP_SCENARIOS for p in PROMPT_IDS for k in (1, 2, 3)]


@dataclass(frozen=True)
class LogprobCase:
    """Sampled requests (temperature 1) whose logprobs must be the target's at every position, for accepted drafts,
    corrections and bonus tokens alike."""

    prompt_id: str
    k: int
    draft_mode: str

    @property
    def id(self) -> str:
        return f"logprobs-T1.0-k{self.k}-{self.draft_mode}-{self.prompt_id}"


# sampled at temperature 1, token soup's drafts are almost never accepted: its outputs would judge no draft's logprob
LOGPROB_PROMPT_IDS = ("natural-01", "code-01", "repetitive-01")


def logprob_cases() -> list[LogprobCase]:
    return [LogprobCase(p, k, mode) for p in LOGPROB_PROMPT_IDS for k in (1, 3) for mode in ("greedy", "sample")]
