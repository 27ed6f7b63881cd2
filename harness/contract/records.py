"""The records of a run, as results.json holds them (schema 2): one definition per record kind, shared by
the suites that write them and by the recorder, triage, reproducers and report that read them.

A test attaches a record to its case with `attach_record(record_property, kind, record)`; the recorder
(harness/plugin/recorder.py) folds every case's records into a `CaseRecord`. Records are plain JSON data
(dicts, lists, numbers, strings), so they cross pytest-xdist workers and land in results.json unchanged;
the TypedDicts below say which keys each kind has. `record_problems` checks a record against its kind
(tests/test_recorder.py runs it on the records of a real run).

Output positions are 0-based indices into the generated tokens.
"""

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal, NotRequired, TypedDict, get_type_hints

from harness.contract.passes import reported_passes

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.contract.decoder import DecodeRequest, HiddenPairing, VerifyStep

SCHEMA = 2  # 2: the run header carries the run options; configuration evidence records
RECORD_PREFIX = "mtp_harness."  # a record's user-property name is RECORD_PREFIX + kind
RecordKind = Literal[
    "divergence",
    "sampling",
    "invariants",
    "acceptance",
    "passes",
    "conformance",
    "isolation",
    "speculation",
    "configuration_evidence",
    "repeat",
    "known",
    "greedy_check",
    "params",
    "unjudged",
]
Outcome = Literal["passed", "failed", "error", "skipped", "xfailed", "near-tie"]


class TokenRecord(TypedDict):
    id: int
    text: str


class ProbableTokenRecord(TypedDict):
    id: int
    text: str
    probability: float


class StepRecord(TypedDict):
    """One verification pass: tokens committed before it, its drafts, how many were accepted, what it emitted."""

    start: int
    drafts: list[int]
    accepted: int
    emitted: list[int]


class Divergence(TypedDict):
    """The first place where a decoder's greedy tokens differ from the reference's (harness/checks/divergence.py
    finds it; `describe_divergence` there says it in words)."""

    index: int
    expected_token: int | None
    actual_token: int | None
    expected_text: str
    actual_text: str
    context_text: str
    margin: float | None  # the precise re-scoring's top-2 logit margin there
    near_tie: bool
    token_gap: float | None  # the precise best logit minus the decoder's token's logit there


class DivergenceRecord(Divergence):
    """A greedy case whose output parted from the reference (suites/conftest.py): the failing divergence,
    or the first near-tie of a case that passed over near-ties, with the case around it."""

    prompt_id: str
    dtype: str
    num_draft_tokens: int | None
    prompt_ids: list[int] | None
    max_new_tokens: int | None
    eos_token_ids: list[int] | None
    reference_tokens: list[TokenRecord]
    actual_tokens: list[TokenRecord]
    top5: list[ProbableTokenRecord]
    forced_drafts: dict[str, int]  # output position (a JSON key: a string) -> forced token
    steps: list[StepRecord]


class RequestRecord(TypedDict):
    """A DecodeRequest as plain data (harness/triage/shrink.py reads it back)."""

    prompt_ids: list[int]
    max_new_tokens: int
    num_draft_tokens: int
    eos_token_ids: list[int]
    forced_drafts: dict[str, int]
    temperature: float
    top_k: int
    top_p: float
    seed: int
    draft_mode: str


# "pass" is a Python keyword, so this record takes the functional syntax
ViolationRecord = TypedDict(
    "ViolationRecord",
    {
        "request": int,
        "pass": int,
        "invariant": str,
        "where": str,
        "difference": float | None,
        "at": str,
        "detail": str,
    },
)


class InvariantsRecord(TypedDict):
    """The invariant checks of one case (suites/invariants/conftest.py); a case that checks several runs adds
    its records up (merge_invariants)."""

    passes: int
    recurrent_checks: int  # hybrid models: (conv, recurrent) state pairs checked
    violations: list[ViolationRecord]
    first_request: NotRequired[RequestRecord]  # the request of the first violation, for shrinking


class PValueRecord(TypedDict):
    test: str
    raw: float
    holm: float


class PositionRecord(TypedDict):
    """One output position of a whole-sequence case: its KS and log-likelihood tests."""

    position: int
    what: str
    n: int
    ks_p: float
    ks_holm: float
    u_moved: str
    z: float
    z_p: float
    z_holm: float


class CellRecord(TypedDict):
    label: str
    observed: int
    expected: float


class SamplingRecord(TypedDict):
    """One sampling case (suites/sampling/conftest.py): a first-token-law case ("law") or a whole-sequence
    case ("pit")."""

    case_id: str
    kind: Literal["law", "pit"]
    n: int
    cells: int | None
    family_size: int
    alpha_per_test: float
    family_alpha: float
    adjustment: str
    p_values: list[PValueRecord]
    kl: float | None
    tv: float | None
    detectable_tv: float | None
    cells_table: list[CellRecord]
    pit_histogram: list[int] | None
    rejected: bool
    positions: NotRequired[list[PositionRecord]]  # pit cases
    truncated_runs: NotRequired[int]  # pit cases: sequences ending in an accepted run cut by max_new_tokens


class AcceptanceRecord(TypedDict):
    """The acceptance profile of one run (suites/invariants/test_acceptance_profile.py)."""

    decoder: str
    k: int
    passes: int
    accepted_histogram: list[int]
    tokens_per_pass: float
    per_depth_acceptance: list[float]
    head_cost_vs_verify: float | None
    head_fidelity: list[dict[str, Any]]


class GreedyCheckRecord(TypedDict):
    """How much of a greedy output was checked against a target-only reference (suites/conftest.py): every
    position up to a failing divergence, near-ties included (the reference re-anchored on the decoder's prefix)."""

    positions: int  # output positions
    checked: int  # positions compared with a target-only reference
    near_ties: list[int]  # output positions of the near-ties passed over


class HiddenPairingRecord(TypedDict):
    """harness.contract.decoder.HiddenPairing as plain data."""

    step: int
    position: int
    hidden: list[float] | None


class PassesRecord(TypedDict):
    """A request whose verification passes broke a check (greedy suite): the passes it made, the pass
    structure the forced schedule implies (start, emitted), and, where the check compares two decodes of the
    same request, the other decode's passes."""

    prompt_id: str
    num_draft_tokens: int
    forced_drafts: dict[str, int]
    expected: list[list[int]] | None  # [start, emitted] per pass, where a schedule implies them
    steps: list[StepRecord]
    other_steps: list[StepRecord] | None  # the same request decoded alone, where the check compares
    other: str | None  # what other_steps is ("alone")
    hidden_pairings: NotRequired[list[HiddenPairingRecord]]  # of `steps`' decode, where the engine reports them
    other_hidden_pairings: NotRequired[list[HiddenPairingRecord]]  # of `other_steps`' decode
    step_facts: NotRequired[
        dict[str, list[int]]
    ]  # of `steps`' decode, where the engine reports its steps (DecodeResult)
    other_step_facts: NotRequired[dict[str, list[int]]]  # of `other_steps`' decode


class ConformanceRequestRecord(TypedDict):
    prompt_id: str
    prompt_ids: list[int]
    token_ids: list[int]
    steps: list[StepRecord]
    prefill_chunk_ends: NotRequired[list[int]]  # where the engine ended its prompt's prefill chunks (DecodeResult)
    hidden_pairings: NotRequired[list[HiddenPairingRecord]]  # the MTP layer's pairings the engine reports
    step_facts: NotRequired[dict[str, list[int]]]  # per pass, facts of its engine step (DecodeResult)


class ConformanceMismatchRecord(TypedDict):
    request: int  # index into the record's requests
    start: int  # output position the pass started at
    drafts: list[int]
    expected: list[int]  # the harness proposer's drafts for the same committed prefix


class ConformanceRecord(TypedDict):
    """Draft conformance (invariants suite): the passes whose drafts the committed prefix does not give."""

    num_draft_tokens: int
    passes: int
    mismatches: list[ConformanceMismatchRecord]
    requests: list[ConformanceRequestRecord]  # the requests with a mismatch


class IsolationRecord(TypedDict):
    """RNG isolation (invariants suite): a sampled request whose output changed with its batch."""

    request: RequestRecord
    alone: list[int]
    in_batch: list[int]
    alone_steps: NotRequired[list[StepRecord]]
    in_batch_steps: NotRequired[list[StepRecord]]
    alone_hidden_pairings: NotRequired[list[HiddenPairingRecord]]  # where the engine reports them
    in_batch_hidden_pairings: NotRequired[list[HiddenPairingRecord]]


class SpeculationRecord(TypedDict):
    """A seeded sampled request whose tokens changed with speculation, for an engine that promises they do not
    (suites/invariants/test_speculation_keeps_seeded_samples.py)."""

    request: RequestRecord
    without: list[int]
    speculative: list[int]
    speculative_steps: NotRequired[list[StepRecord]]  # the passes of the speculative decode
    more: NotRequired[list["SpeculationRecord"]]  # every other request of the case that changed, the same way


class ConfigurationEvidenceRecord(TypedDict):
    """A check under a deployed engine configuration (suites/engine/): the configuration, and the engine's own
    counters of what it did (harness/subjects/engines/configurations.py EVIDENCE), which must show it happened."""

    configuration: str
    what: str
    evidence: dict[str, int]
    required: list[str]  # the counters that must be > 0


class RepeatRecord(TypedDict):
    """A request decoded twice where the engine promises the same output (two fresh engines, two deployed
    configurations; suites/engine/): the two runs and both outputs."""

    request: RequestRecord
    runs: list[str]
    first: list[int]
    second: list[int]


class KnownRecord(TypedDict):
    """A failure explained by recorded findings (harness/subjects/engines/findings.py): which ones, and why."""

    findings: list[str]  # slugs
    explanation: str


class UnjudgedRecord(TypedDict):
    """The part of a case's check that did not run in this run, and why (e.g. draft conformance under --reference
    engine, which loads no weights): the case's verdict is that of the rest."""

    checks: list[str]
    why: str


class CaseRecord(TypedDict):
    """One test case of a run, as results.json lists it. An xfailed case keeps its failure message and records:
    `known` says which findings explained it."""

    nodeid: str
    suite: str
    case: str
    decoder: str
    model: str
    params: dict[str, str]
    outcome: Outcome
    duration_s: float
    message: str
    divergence: DivergenceRecord | None
    sampling: SamplingRecord | None
    invariants: InvariantsRecord | None
    passes: NotRequired[PassesRecord]
    greedy_check: NotRequired[GreedyCheckRecord]
    conformance: NotRequired[ConformanceRecord]
    isolation: NotRequired[IsolationRecord]
    speculation: NotRequired[SpeculationRecord]
    configuration_evidence: NotRequired[ConfigurationEvidenceRecord]
    repeat: NotRequired[RepeatRecord]
    known: NotRequired[KnownRecord]
    unjudged: NotRequired[UnjudgedRecord]


class GroupRecord(TypedDict):
    """A failure group (harness/triage/groups.py): failing cases that share a signature."""

    group: int
    signature: str
    suite: str
    cause: str
    count: int
    smallest: str
    cases: list[str]
    rerun: str
    minimal: NotRequired[dict[str, Any] | None]  # the minimal case (harness/triage/minimal_cases.py)
    reproducer: NotRequired[str]
    reproducer_command: NotRequired[str]
    reproducer_about: NotRequired[str]


class KnownGroupRecord(TypedDict):
    """The expected failures a finding explained (harness/triage/groups.py known_groups)."""

    finding: str  # slug
    count: int
    causes: list[dict[str, Any]]  # {"cause": words, "count": n}, largest first
    cases: list[str]  # node ids


class RunHeader(TypedDict):
    """Who ran what, where and with which versions; `command` replays the run."""

    run_id: str
    started: str
    session_seed: int | None
    decoder: str
    model: str
    device: str
    dtype: str
    git_commit: str | None
    mtp_harness: str
    torch: str
    transformers: str
    python: str
    command: str
    workers: int
    # the run's options (harness/contract/run_options.py RunOptions.to_record): the reference, the engine's
    # configuration, fixes ([] : as shipped) and arguments; triage's re-run commands are written from it
    options: dict[str, Any]
    engine: NotRequired[str]  # an out-of-process engine: which build of it ran
    engine_runner: NotRequired[str]  # and which of its model runners (vLLM: v1 or v2)
    min_judged: NotRequired[dict[str, int]]  # suite -> the fewest judged cases the run asked of it (--min-judged)
    finished: NotRequired[str | None]
    status: NotRequired[str]
    exit_status: NotRequired[int | None]


class Results(TypedDict):
    schema: int
    run: RunHeader
    cases: list[CaseRecord]
    groups: list[GroupRecord]
    known: NotRequired[list[KnownGroupRecord]]  # runs of an engine subject with recorded findings
    acceptance: AcceptanceRecord | None
    mutants: dict[str, Any] | None
    false_alarms: NotRequired[dict[str, Any]]  # nightly: sampling-suite runs on the correct decoder that rejected


class FeatureOutputRecord(TypedDict):
    """A greedy request under request features whose output broke the features suite's check: what it asked for,
    the target-only output it had to equal, what the decoder emitted, and its passes (what a signature reads)."""

    settings: str  # the case's feature settings (harness/checks/feature_grid.py GREEDY_SETTINGS)
    min_tokens: int
    eos_token_ids: list[int]
    stop_sequences: list[list[int]]
    constraint: NotRequired[str]  # a structured output: "kind: spec"
    forced_drafts: dict[str, int]
    expected: list[int]
    actual: list[int]
    finish_reason: str
    expected_finish_reason: str
    steps: list[StepRecord]


class LogprobMismatchRecord(TypedDict):
    """One output position whose reported logprobs are not the target's (features suite)."""

    position: int
    kind: str  # "draft" (an accepted draft), "correction", "bonus": harness/checks/feature_checks.py token_kinds
    drafted_pass: bool  # the pass that emitted it proposed drafts
    token: int
    reported: float | None  # the reported logprob of the output token (None: no entry for the position)
    expected: float  # the target's, teacher-forced
    reported_top: int  # how many top tokens were reported there
    asked_top: int
    what: str  # the mismatch in words


class LogprobsRecord(TypedDict):
    """A request whose reported logprobs broke the features suite's check: every mismatching position."""

    seed: int
    positions: int  # output positions
    steps: list[StepRecord]
    mismatches: list[LogprobMismatchRecord]


RECORD_TYPES: Mapping[str, type] = {
    "divergence": DivergenceRecord,
    "sampling": SamplingRecord,
    "invariants": InvariantsRecord,
    "acceptance": AcceptanceRecord,
    "passes": PassesRecord,
    "greedy_check": GreedyCheckRecord,
    "conformance": ConformanceRecord,
    "isolation": IsolationRecord,
    "speculation": SpeculationRecord,
    "configuration_evidence": ConfigurationEvidenceRecord,
    "repeat": RepeatRecord,
    "known": KnownRecord,
    "unjudged": UnjudgedRecord,
    "logprobs": LogprobsRecord,
    "feature_output": FeatureOutputRecord,
}


def step_records(steps: "Sequence[VerifyStep]") -> list[StepRecord]:
    """A decoder's verification passes as records, as it reported them (harness/contract/passes.py: also passes that
    break the pass contract)."""
    return [
        StepRecord(start=s.start, drafts=list(s.drafts), accepted=s.accepted, emitted=list(s.emitted))
        for s in reported_passes(steps)
    ]


def step_fact_records(step_facts: "Mapping[str, Sequence[int]]") -> dict[str, list[int]]:
    """Per-pass facts of each pass's engine step (DecodeResult.step_facts) as a record."""
    return {name: list(values) for name, values in step_facts.items()}


def hidden_pairing_records(pairings: "Sequence[HiddenPairing]") -> list[HiddenPairingRecord]:
    """An engine's reported MTP pairings as records."""
    return [
        HiddenPairingRecord(step=p.step, position=p.position, hidden=None if p.hidden is None else list(p.hidden))
        for p in pairings
    ]


def hidden_pairings_from_records(records: "Sequence[Mapping]") -> "tuple[HiddenPairing, ...]":
    """Records back as HiddenPairings."""
    from harness.contract.decoder import HiddenPairing

    return tuple(
        HiddenPairing(int(r["step"]), int(r["position"]), None if r["hidden"] is None else tuple(r["hidden"]))
        for r in records
    )


def request_record(request: "DecodeRequest") -> RequestRecord:
    """A request as plain data (harness/triage/shrink.py RequestCase.from_request reads it back)."""
    return RequestRecord(
        prompt_ids=list(request.prompt_ids),
        max_new_tokens=request.max_new_tokens,
        num_draft_tokens=request.num_draft_tokens,
        eos_token_ids=list(request.eos_token_ids),
        forced_drafts={str(p): t for p, t in request.forced_drafts.items()},
        temperature=request.sampling.temperature,
        top_k=request.sampling.top_k,
        top_p=request.sampling.top_p,
        seed=request.seed,
        draft_mode=request.draft_mode,
    )


def attach_record(record_property: Callable[[str, object], None], kind: RecordKind, record: Mapping) -> None:
    """Attach a record to the running test's report (pytest's record_property), as JSON."""
    record_property(RECORD_PREFIX + kind, json.dumps(record))


def record_problems(typed: type, record: Mapping[str, Any]) -> list[str]:
    """The keys `record` lacks or has beyond its TypedDict, recursively through nested records and lists of
    them; [] when it fits."""
    problems = [f"missing {key!r}" for key in sorted(typed.__required_keys__ - record.keys())]
    problems += [f"unknown {key!r}" for key in sorted(record.keys() - typed.__annotations__.keys())]
    for key, hint in get_type_hints(typed).items():
        nested = _nested_record_type(hint)
        value = record.get(key)
        if nested is None or value is None:
            continue
        for item in value if isinstance(value, list) else [value]:
            problems += [f"{key}: {problem}" for problem in record_problems(nested, item)]
    return problems


def _nested_record_type(hint: object) -> type | None:
    """The TypedDict inside a hint like SomeRecord, list[SomeRecord], SomeRecord | None or NotRequired[...]."""
    candidates = [hint, *getattr(hint, "__args__", ())]
    for candidate in candidates:
        for inner in [candidate, *getattr(candidate, "__args__", ())]:
            if isinstance(inner, type) and hasattr(inner, "__required_keys__"):
                return inner
    return None
