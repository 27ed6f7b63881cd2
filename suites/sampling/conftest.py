"""Sampling suites: every case of the run is one family of p-values, corrected together with Holm at
FAMILY_ALPHA. The family is the cases selected in this session, computed once, on first use, by every pytest-xdist
worker that reaches one of its cases: each takes the next case nobody has claimed (harness/plugin/shared_work.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pytest

from harness.checks.law_records import law_record
from harness.checks.sampling_cases import (
    PIT_LENGTH,
    LawOutcome,
    PitOutcome,
    SamplingCase,
    case_grid,
    p_values_per_case,
    pit_test_names,
    run_law_case,
    run_pit_case,
)
from harness.contract.budget import BUDGETS
from harness.contract.decoder import cannot_serve
from harness.contract.records import PositionRecord, SamplingRecord, attach_record
from harness.contract.run_options import Reference
from harness.decoding.slots import KV_BLOCK
from harness.plugin.shared_work import SharedWork, pickle_safe
from harness.stats.goodness_of_fit import GoodnessOfFit
from harness.stats.multiple_testing import FAMILY_ALPHA, holm
from harness.stats.power import POWER, ks_sample_size, law_sample_size, min_detectable_tv
from harness.stats.target_law import OTHER

CASES = {case.id: case for case in case_grid()}


@dataclass
class FamilyResult:
    outcome: LawOutcome | PitOutcome
    n: int
    raw: tuple[float, ...]  # the case's p-values (law: chi-square, G; PIT: pit_test_names())
    adjusted: tuple[float, ...]
    alpha_per_test: float
    detectable_tv: float | None
    # "Bonferroni" or Holm over a part of the family when decided early (SamplingFamily.decided_early): bounds that
    # imply the family's Holm verdict
    adjustment: str = "Holm"


def serves_case(decoder, case: SamplingCase) -> bool:
    capabilities, values = case.needs()
    return cannot_serve(decoder, *capabilities, **values) is None


class SamplingFamily:
    def __init__(self, config, options, session, decoder, bundle, prompts, session_seed, scorer=None):
        self.decoder, self.bundle = decoder, bundle
        self.scorer = (
            scorer  # the truth's source: None, the harness's own model; else the engine's (--reference engine)
        )
        self.session_seed = session_seed  # moves every request's seed (harness/contract/seeds.py session_shifted)
        self.prompts = {p.id: p for p in prompts}
        budget = BUDGETS[options.budget]
        self.tv = options.sampling_tv or budget.sampling_tv
        # the PIT cases' single-position shift, scaled with --sampling-tv like the law cases' shift
        self.position_tv = budget.position_tv * self.tv / budget.sampling_tv
        # the family: the selected cases the decoder can serve (the others skip, naming what it cannot honour)
        self.selected = [
            item.callspec.params["case"]
            for item in session.items
            if hasattr(item, "callspec") and "case" in item.callspec.params and item.get_closest_marker("sampling")
            if serves_case(decoder, CASES[item.callspec.params["case"]])
        ]
        self.m = sum(p_values_per_case(CASES[c]) for c in self.selected)
        self.results: dict[str, FamilyResult] | None = None
        self.outcomes: dict[str, LawOutcome | PitOutcome] = {}
        # the mutation catalogue only needs the first rejection: decide a case before the whole family is computed
        # where that decides it exactly (decided_early)
        self.decide_early = config.getoption("--harness-stop-suite-on-catch")
        self.shared = SharedWork.of(config, "sampling-family")

    def n(self, law) -> int:
        """A law case's N: its omnibus tests over its own pooled cells detect a TV shift of self.tv with power POWER
        at the worst Holm level alpha / m (harness/stats/power.py law_sample_size)."""
        return law_sample_size({**law.cells, OTHER: law.other}, OTHER, self.tv, FAMILY_ALPHA / max(self.m, 1))

    @property
    def pit_n(self) -> int:
        # sequences per PIT case: one position's KS detects a shift of self.position_tv at alpha / m
        return ks_sample_size(self.position_tv, FAMILY_ALPHA / max(self.m, 1))

    def outcome(self, case_id: str) -> LawOutcome | PitOutcome:
        """The case's samples and statistics (computed here, or by the worker that claimed it first); a decoder error is
        kept and re-raised for this case only."""
        if case_id not in self.outcomes:
            self.outcomes[case_id] = self.shared.compute_once(case_id, self._sampled)
        if isinstance(self.outcomes[case_id], Exception):
            raise self.outcomes[case_id]
        return self.outcomes[case_id]

    def _sampled(self, case_id: str) -> LawOutcome | PitOutcome | Exception:
        case: SamplingCase = CASES[case_id]
        prompt_ids = tuple(self.prompts[case.prompt_id].encode(self.bundle.tokenizer))
        try:
            if case.kind == "law":
                return run_law_case(self.decoder, self.bundle, prompt_ids, case, self.n, self.session_seed, self.scorer)
            return run_pit_case(self.decoder, self.bundle, prompt_ids, case, self.pit_n, self.session_seed, self.scorer)
        except Exception as error:  # the other cases of the family still run
            return pickle_safe(error)

    def compute(self) -> dict[str, FamilyResult | Exception]:
        """Holm over every selected case's p-values; a case whose decoder raised keeps its error and enters
        the family with p = 1 (it can only make the others' correction more conservative)."""
        # the whole-sequence cases first (the costliest: the workers' last cases are short, so none waits long for
        # another's), then grouped by k and draft mode: an engine subject runs one engine process for each pair and
        # keeps a few alive (harness/subjects/engines/process.py EnginePool); each case's randomness is its own
        order = sorted(self.selected, key=lambda c: (CASES[c].kind != "pit", CASES[c].k, CASES[c].draft_mode))
        missing = [case_id for case_id in order if case_id not in self.outcomes]
        self.outcomes.update(self.shared.compute_all(missing, self._sampled))
        outcomes = self.outcomes
        raw = {cid: self.raw(cid) for cid in outcomes}
        flat = [p for cid in self.selected for p in raw[cid]]
        adjusted = iter(holm(flat))
        results: dict[str, FamilyResult | Exception] = {}
        for cid in self.selected:
            own = tuple(next(adjusted) for _ in raw[cid])
            failed = isinstance(outcomes[cid], Exception)
            results[cid] = outcomes[cid] if failed else self.family_result(outcomes[cid], raw[cid], own)
        return results

    def family_result(self, outcome, raw, adjusted, adjustment="Holm") -> FamilyResult:
        detectable = None
        if isinstance(outcome, LawOutcome):
            detectable = min_detectable_tv(outcome.fit.n, max(outcome.fit.df, 1), FAMILY_ALPHA / self.m, POWER)
        n = outcome.fit.n if isinstance(outcome, LawOutcome) else self.pit_n
        detectable = detectable if isinstance(outcome, LawOutcome) else self.position_tv
        return FamilyResult(outcome, n, raw, adjusted, FAMILY_ALPHA / self.m, detectable, adjustment)

    def raw(self, case_id: str) -> tuple[float, ...]:
        """A computed case's p-values; a case whose decoder raised counts as p = 1 (compute)."""
        outcome = self.outcomes[case_id]
        return (1.0,) * p_values_per_case(CASES[case_id]) if isinstance(outcome, Exception) else _p_values(outcome)

    def decided_early(self, case_id: str) -> FamilyResult | None:
        """The case's exact Holm verdict before the whole family is computed, where a part of it decides (catch mode,
        --harness-stop-suite-on-catch, where the mutation catalogue stops at the first rejection):
        - rejected when Bonferroni rejects it alone (m p <= alpha implies Holm's rejection);
        - not rejected when Holm over the cases computed so far does not reject it (a part of the family bounds the
          whole's adjusted p-values from below: harness/stats/multiple_testing.py holm).
        Otherwise the next case is computed, the cheapest first (law cases by k, then the whole-sequence ones), and
        the part checked again; None when only the whole family decides."""
        if case_id not in self.selected:
            return None
        raw = _p_values(self.outcome(case_id))  # a decoder error is raised for this case
        bonferroni = tuple(min(1.0, self.m * p) for p in raw)
        if min(bonferroni) <= FAMILY_ALPHA:
            return self.family_result(self.outcomes[case_id], raw, bonferroni, "Bonferroni")
        rest = sorted((c for c in self.selected if c != case_id), key=cheapest_first)
        for next_case in [None, *rest]:
            if next_case is not None and next_case not in self.outcomes:
                self.outcomes[next_case] = self.shared.compute_once(next_case, self._sampled)
            part = [c for c in self.selected if c in self.outcomes]
            if len(part) == len(self.selected):
                return None  # every case computed: the family decides (compute)
            flat = [(c, p) for c in part for p in self.raw(c)]
            own = tuple(
                adjusted for (c, _), adjusted in zip(flat, holm([p for _, p in flat]), strict=True) if c == case_id
            )
            if min(own) > FAMILY_ALPHA:
                adjustment = f"Holm over {len(part)} of {len(self.selected)} cases, a lower bound"
                return self.family_result(self.outcomes[case_id], raw, own, adjustment)
        return None

    def result(self, case_id: str) -> FamilyResult:
        if self.results is None and self.decide_early:
            early = self.decided_early(case_id)
            if early is not None:
                return early
        if self.results is None:
            self.results = self.compute()
        result = self.results[case_id]
        if isinstance(result, Exception):
            raise result
        return result


def _p_values(outcome: LawOutcome | PitOutcome) -> tuple[float, ...]:
    if isinstance(outcome, LawOutcome):
        return outcome.fit.chi2_p, outcome.fit.g_p
    return outcome.p_values()


def position_note(outcome: PitOutcome, t: int) -> str:
    """What output position t is: the first (the prefill's token), a KV block start, the last."""
    notes = []
    if t == 0:
        notes.append("the first token")
    if (outcome.prompt_length + t) % KV_BLOCK == 0:
        notes.append(f"the first token of a KV block of {KV_BLOCK}")
    if t == PIT_LENGTH - 1:
        notes.append("the last token")
    return f" ({', '.join(notes)})" if notes else ""


def worst_positions(result: FamilyResult) -> tuple[int, int]:
    """The output positions with the smallest KS and log-likelihood p-values."""
    raw = result.raw
    ks = min(range(PIT_LENGTH), key=lambda t: raw[3 + t])
    ll = min(range(PIT_LENGTH), key=lambda t: raw[3 + PIT_LENGTH + t])
    return ks, ll


def cheapest_first(case_id: str) -> tuple[bool, int, str]:
    """A sampling case's cost rank: the law cases by k, then the whole-sequence (PIT) cases. (compute() orders the
    other way, the costliest first, so that the workers sharing the family end together.)"""
    case = CASES[case_id]
    return case.kind == "pit", case.k, case.draft_mode


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Catch mode (--harness-stop-suite-on-catch): the sampling cases run cheapest first, in the places they hold among
    the items, so that a mutant's first rejection comes before the costly cases are computed (decided_early)."""
    if not config.getoption("--harness-stop-suite-on-catch"):
        return
    places = [i for i, item in enumerate(items) if item.get_closest_marker("sampling") and case_of(item) in CASES]
    ordered = sorted((items[i] for i in places), key=lambda item: cheapest_first(case_of(item)))
    for place, item in zip(places, ordered, strict=True):
        items[place] = item


def case_of(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return callspec.params.get("case") if callspec is not None else None


@pytest.fixture(scope="session")
def sampling_family(pytestconfig, run_options, request, decoder, bundle, prompts, harness_seed) -> SamplingFamily:
    """The session's family of sampling cases; under --reference engine its truth (the first tokens' law, the
    whole-sequence terms) is computed inside the engine without speculation (harness/checks/engine_reference.py)."""
    scorer = request.getfixturevalue("target_reference") if run_options.reference is Reference.ENGINE else None
    return SamplingFamily(pytestconfig, run_options, request.session, decoder, bundle, prompts, harness_seed, scorer)


def impossible_draws(fit: GoodnessOfFit) -> str:
    """What was drawn where the law has no mass (token ids, most frequent first), for the failure message."""
    if not fit.impossible_seen:
        return ""
    drawn = ", ".join(
        f"{list(cell) if isinstance(cell, tuple) else cell} x{count}" for cell, count in fit.impossible_seen
    )
    return f"; drawn where the law has no mass: {drawn}"


def describe(result: FamilyResult) -> str:
    outcome = result.outcome
    if isinstance(outcome, LawOutcome):
        fit = outcome.fit
        worst = max(range(len(fit.observed)), key=lambda i: abs(fit.observed[i] - fit.expected[i]))
        return (
            f"N={fit.n}, {fit.cells} cells (pruned mass {outcome.law.other:.2e} pooled), chi-square p={result.raw[0]:.3g} "
            f"({result.adjustment} {result.adjusted[0]:.3g}), G p={result.raw[1]:.3g} ({result.adjustment} {result.adjusted[1]:.3g}), KL={fit.kl:.3g}, "
            f"TV={fit.tv:.3g}, detectable TV at power {POWER}: {result.detectable_tv:.3g}; largest cell gap: "
            f"{fit.labels[worst]} observed {fit.observed[worst]} expected {fit.expected[worst]:.1f}"
            + impossible_draws(fit)
        )
    test, raw, adjusted, how = outcome.test, result.raw, result.adjusted, result.adjustment
    ks, ll = worst_positions(result)
    at_ks, at_ll = outcome.positions[ks], outcome.positions[ll]
    return (
        f"{result.n} sequences, {test.n} probability-ordered PIT values, KS={test.ks:.3g} p={raw[0]:.3g} ({how} "
        f"{adjusted[0]:.3g}), binned chi-square p={raw[1]:.3g} ({how} {adjusted[1]:.3g}), log-likelihood "
        f"Z={outcome.pooled.z:.3g} p={raw[2]:.3g} ({how} {adjusted[2]:.3g}); per position, smallest KS p at output "
        f"position {ks}{position_note(outcome, ks)}: {raw[3 + ks]:.3g} ({how} {adjusted[3 + ks]:.3g}, u "
        f"{at_ks.ks_direction}), smallest log-likelihood p at {ll}{position_note(outcome, ll)}: "
        f"Z={at_ll.z:.3g} p={raw[3 + PIT_LENGTH + ll]:.3g} ({how} {adjusted[3 + PIT_LENGTH + ll]:.3g}); "
        f"{outcome.truncated} sequences end in an accepted run cut by max_new_tokens; histogram {list(test.histogram)}"
    )


def sampling_record(result: FamilyResult, case_id: str, decode) -> SamplingRecord:
    """The structured record of one case for the report (schema 1, `sampling`)."""
    outcome = result.outcome
    if isinstance(outcome, LawOutcome):
        return law_record(
            case_id,
            outcome.fit,
            result.raw,
            result.adjusted,
            result.alpha_per_test,
            result.detectable_tv,
            result.adjustment,
            decode,
        )
    record: SamplingRecord = {
        "case_id": case_id,
        "kind": "pit",
        "n": outcome.test.n,
        "cells": None,
        "family_size": round(FAMILY_ALPHA / result.alpha_per_test),
        "alpha_per_test": result.alpha_per_test,
        "family_alpha": FAMILY_ALPHA,
        "adjustment": result.adjustment,
        "p_values": [
            {"test": test, "raw": raw, "holm": adjusted}
            for test, raw, adjusted in zip(pit_test_names(), result.raw, result.adjusted, strict=True)
        ][:3],  # a PIT case's per-position p-values are under "positions"
        "kl": None,
        "tv": None,
        "detectable_tv": result.detectable_tv,
        "cells_table": [],
        "pit_histogram": list(outcome.test.histogram),
        "rejected": min(result.adjusted) <= FAMILY_ALPHA,
        "positions": position_records(result),
        "truncated_runs": outcome.truncated,
    }
    return record


def position_records(result: FamilyResult) -> list[PositionRecord]:
    """Per output position of a PIT case: KS and log-likelihood p-values (raw and adjusted), the side u moved
    to, Z, and what the position is."""
    outcome, raw, adjusted = result.outcome, result.raw, result.adjusted
    return [
        {
            "position": t,
            "what": position_note(outcome, t).strip(" ()"),
            "n": at.n,
            "ks_p": raw[3 + t],
            "ks_holm": adjusted[3 + t],
            "u_moved": at.ks_direction,
            "z": at.z,
            "z_p": raw[3 + PIT_LENGTH + t],
            "z_holm": adjusted[3 + PIT_LENGTH + t],
        }
        for t, at in enumerate(outcome.positions)
    ]


def assert_case_passes(result: FamilyResult, record_property, case_id: str = "", decode=None) -> None:
    record_property("sampling", describe(result))
    if decode is not None:
        attach_record(record_property, "sampling", sampling_record(result, case_id, decode))
    if isinstance(result.outcome, LawOutcome) and result.outcome.fit.unjudgeable:
        pytest.fail(f"unjudgeable: {result.outcome.fit.unjudgeable}", pytrace=False)
    if min(result.adjusted) <= FAMILY_ALPHA:
        pytest.fail(
            f"rejected at family-wise alpha {FAMILY_ALPHA} ({result.adjustment} over {round(FAMILY_ALPHA / result.alpha_per_test)} p-values): {describe(result)}",
            pytrace=False,
        )
    assert not math.isnan(min(result.raw))


@pytest.fixture
def check_sampling_case(sampling_family, require, record_property):
    """check(case_id): skip what the decoder cannot serve, else fail if the case rejects at the family alpha."""

    def check(case_id: str) -> FamilyResult:
        capabilities, values = CASES[case_id].needs()
        require(*capabilities, **values)
        result = sampling_family.result(case_id)
        assert_case_passes(result, record_property, case_id, sampling_family.bundle.tokenizer.decode)
        return result

    return check
