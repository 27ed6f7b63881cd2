"""The catalogue is complete and honest: every registered mutant says which real failure it models, names
the suite aimed at it, and is either proven caught by a pytester test of that suite or is a control."""

from __future__ import annotations

import pytest
from test_features_suite_catches_mutants import FEATURE_MUTANTS
from test_greedy_suite_catches_mutants import GREEDY_MUTANTS
from test_hybrid_model import RECURRENT_STATE_MUTANTS
from test_invariant_suite_catches_mutants import STATE_MUTANTS
from test_pass_contract import CONTRACT_MUTANTS
from test_position_mutants import CATCHING_CASE as POSITION_CATCHING_CASE
from test_sampling_suite_catches_mutants import CATCHING_CASE

from harness.subjects.mutant_decoders import EXPECTED_VERDICT, MUTANTS, TARGET_SUITE

PROVEN = {
    "greedy": set(GREEDY_MUTANTS),
    "invariants": {*STATE_MUTANTS, *RECURRENT_STATE_MUTANTS, *CONTRACT_MUTANTS},
    "sampling": {*CATCHING_CASE, *POSITION_CATCHING_CASE},
    "features": set(FEATURE_MUTANTS),
}


def test_the_catalogue_has_at_least_fourteen_mutants_meant_to_be_caught():
    assert sum(verdict == "caught" for verdict in EXPECTED_VERDICT.values()) >= 14


@pytest.mark.parametrize("name", sorted(MUTANTS))
def test_each_mutant_models_a_named_bug_and_is_proven_caught_or_is_a_control(name):
    assert "Bug class" in (MUTANTS[name].__doc__ or ""), f"{name}: the docstring must name the bug class it models"
    if EXPECTED_VERDICT[name] == "caught":
        assert name in PROVEN[TARGET_SUITE[name]], f"{name}: no pytester test proves {TARGET_SUITE[name]} catches it"
    else:
        assert not any(name in proven for proven in PROVEN.values()), f"control {name} must not be caught"
