"""harness.testing without a child run: naming the decoder, checking options, and how a check's recorded
outcome becomes the pytest outcome of the user's case (the installed-use test runs the real thing)."""

from __future__ import annotations

import json

import pytest

from harness.testing import ChecksUnavailable, HarnessCheck, HarnessChecks, check_id, decoder_name


def make_decoder(bundle, device, dtype):  # a module-level factory: nameable by module:qualname
    raise NotImplementedError


def test_a_factory_is_named_by_module_and_qualified_name_and_a_local_one_is_refused():
    assert decoder_name("my-engine") == "my-engine"
    assert decoder_name(make_decoder) == f"{__name__}:make_decoder"

    def local_factory(bundle, device, dtype):
        raise NotImplementedError

    with pytest.raises(ChecksUnavailable, match="top level of an importable module"):
        decoder_name(local_factory)


def test_unknown_suites_and_budgets_are_named():
    with pytest.raises(ChecksUnavailable, match=r"suites \['greedy', 'speed'\]"):
        HarnessChecks("mtp", suites=["greedy", "speed"])
    with pytest.raises(ChecksUnavailable, match="budget 'huge'"):
        HarnessChecks("mtp", budget="huge")


def test_a_check_id_is_readable_and_has_no_node_id_separator():
    nodeid = "suites/greedy/test_forced_rejections.py::test_forced_rejections_keep_the_reference[code-01-k1-last]"
    assert (
        check_id(nodeid)
        == "greedy/test_forced_rejections.py:test_forced_rejections_keep_the_reference[code-01-k1-last]"
    )


def recorded(outcome: str, message: str = "", **records: object) -> HarnessCheck:
    checks = HarnessChecks("mtp")
    checks._results = {"suites/greedy/t.py::c": {"outcome": outcome, "message": message, **records}}
    return HarnessCheck("suites/greedy/t.py::c", checks)


def test_each_recorded_outcome_becomes_the_cases_outcome_with_the_harness_message():
    recorded("passed")()
    recorded("near-tie")()
    with pytest.raises(pytest.skip.Exception, match="serves num_draft_tokens in"):
        recorded("skipped", "decoder 'x' serves num_draft_tokens in {1, 2}, not 3")()
    with pytest.raises(pytest.xfail.Exception, match=r"vllm 0\.32\.0 bug"):
        recorded("xfailed", "vllm 0.32.0 bug, docs/findings/x.md")()
    with pytest.raises(pytest.fail.Exception, match="DIVERGENCE at generated index 1"):
        recorded("failed", "prompt natural-01: DIVERGENCE at generated index 1")()
    with pytest.raises(pytest.fail.Exception, match="recorded no result"):
        HarnessCheck("suites/greedy/t.py::other", recorded("passed").checks)()


def test_a_checks_records_become_the_user_properties_the_recorder_reads():
    divergence = {"index": 1, "near_tie": False}
    check = recorded("failed", "x", divergence=divergence, sampling=None, params={"k": "2"})
    assert check.user_properties() == [
        ("mtp_harness.divergence", json.dumps(divergence)),
        ("mtp_harness.params", json.dumps({"k": "2"})),
    ]
