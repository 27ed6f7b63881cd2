"""The results records' one definition (harness/contract/records.py) finds a record that strays from it."""

from __future__ import annotations

from harness.contract.records import InvariantsRecord, SamplingRecord, record_problems

VIOLATION = {"request": 0, "pass": 2, "invariant": "position ids", "where": "target", "difference": 1.0}
VIOLATION |= {"at": "(0, 1)", "detail": "off by one"}


def test_a_record_with_the_declared_keys_has_no_problems():
    record = {"passes": 3, "recurrent_checks": 0, "violations": [VIOLATION]}
    assert record_problems(InvariantsRecord, record) == []


def test_a_missing_key_and_an_unknown_key_are_named_down_to_a_nested_record():
    violation = {key: value for key, value in VIOLATION.items() if key != "where"} | {"layer": 1}
    record = {"passes": 3, "violations": [violation], "first_request": {"prompt_ids": [1]}}
    problems = record_problems(InvariantsRecord, record)
    assert "missing 'recurrent_checks'" in problems
    assert "violations: missing 'where'" in problems and "violations: unknown 'layer'" in problems
    assert any(problem.startswith("first_request: missing 'max_new_tokens'") for problem in problems)


def test_optional_keys_may_be_absent_and_nothing_else_may():
    law = {
        "case_id": "c",
        "kind": "law",
        "n": 10,
        "cells": 2,
        "family_size": 4,
        "alpha_per_test": 2.5e-4,
        "family_alpha": 1e-3,
        "adjustment": "Holm",
        "p_values": [{"test": "G", "raw": 0.5, "holm": 1.0}],
        "kl": 0.0,
        "tv": 0.0,
        "detectable_tv": 0.1,
        "cells_table": [{"label": "a", "observed": 5, "expected": 5.0}],
        "pit_histogram": None,
        "rejected": False,
    }
    assert record_problems(SamplingRecord, law) == [], "positions and truncated_runs belong to PIT cases only"
    assert record_problems(SamplingRecord, {**law, "positions": [{"position": 0}]})[0].startswith("positions: missing")
