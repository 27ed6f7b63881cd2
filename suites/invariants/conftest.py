"""Invariant suites: run the decoder under test with its inspection hook and check every pass."""

from __future__ import annotations

import pytest

from harness.checks.invariants import Violation, decode_inspected
from harness.contract.decoder import DecodeRequest, PassSnapshot
from harness.contract.records import InvariantsRecord, ViolationRecord, attach_record, request_record

INVARIANT_PROMPTS = ["natural-01", "natural-05", "code-03", "repetitive-02", "soup-02", "eos-01", "long-01", "code-06"]


@pytest.fixture
def inspect(decoder, bundle):
    """Decode with the decoder's observer attached; returns (results, violations). Skips decoders that
    offer no inspection hook (an `observer` attribute): checks 1-5 cannot run on them, never pass."""
    if not hasattr(decoder, "observer"):
        pytest.skip(
            f"decoder {decoder.name!r} offers no inspection hook (an `observer` attribute taking PassSnapshots); "
            "the cache and position checks need one"
        )

    def run(requests: list[DecodeRequest]) -> tuple[list, list[Violation], list[PassSnapshot]]:
        run.last_requests = list(requests)  # for assert_clean's record: the request a violation broke
        results, violations, snapshots = decode_inspected(decoder, bundle, requests)
        assert snapshots, "the inspection hook reported no pass"
        return results, violations, snapshots

    run.last_requests = []
    return run


@pytest.fixture
def assert_clean(record_property, inspect):
    """Fail naming pass, layer, invariant and the largest difference of the first violations (all of them
    are recorded for the report, with the request of the first: failure triage shrinks it)."""

    def check(violations: list[Violation], snapshots: list[PassSnapshot]) -> None:
        record: InvariantsRecord = {
            "passes": len(snapshots),
            # hybrid models: (conv, recurrent) state pairs of linear-attention layers checked (invariant 6)
            "recurrent_checks": sum(len(snapshot.target_recurrent) for snapshot in snapshots),
            "violations": [violation_record(v) for v in violations[:MAX_RECORDED]],
        }
        if violations and violations[0].request_index < len(inspect.last_requests):
            record["first_request"] = request_record(inspect.last_requests[violations[0].request_index])
        attach_record(record_property, "invariants", record)
        _assert_no_violations(violations, snapshots)

    return check


MAX_RECORDED = 200


def violation_record(violation: Violation) -> ViolationRecord:
    return {
        "request": violation.request_index,
        "pass": violation.pass_index,
        "invariant": violation.invariant,
        "where": violation.where,
        "difference": violation.difference,
        "at": violation.at,
        "detail": violation.detail,
    }


def _assert_no_violations(violations: list[Violation], snapshots: list[PassSnapshot]) -> None:
    if violations:
        shown = "\n  ".join(v.describe() for v in violations[:8])
        more = f"\n  ... and {len(violations) - 8} more" if len(violations) > 8 else ""
        pytest.fail(
            f"{len(violations)} invariant violations over {len(snapshots)} passes:\n  {shown}{more}", pytrace=False
        )


@pytest.fixture(scope="session")
def invariant_prompts(prompts):
    chosen = [p for p in prompts if p.id in INVARIANT_PROMPTS]
    assert len(chosen) == len(INVARIANT_PROMPTS)
    return chosen
