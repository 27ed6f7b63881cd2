"""The out-of-process engine machinery (harness/subjects/engines/process.py, wire.py) against a wire-format server that
decodes with the harness's own MTPDecoder, and against servers that fail in the ways real engines do."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness.contract.decoder import DecodeRequest, DecodeResult, SamplingConfig, with_budget_cuts
from harness.contract.paths import FIXTURE_MODELS
from harness.decoding.mtp_decoder import MTPDecoder
from harness.subjects.engines.process import EngineError, EnginePool, EngineProcess, EngineStartTimeout
from harness.subjects.engines.wire import EngineProtocolError, parse_result, request_message, result_message

SERVER = Path(__file__).with_name("engine_server_for_tests.py")
MODEL = FIXTURE_MODELS / "tiny-mtp-prefix"


# Each start either a process of its own or forked from a zygote that imported the server's modules (forked.py): the
# tests that start engines run both ways, and a forked engine must behave as one started on its own in every one.
LAUNCHES = {"own-process": None, "forked": {}}


@pytest.fixture(params=LAUNCHES.values(), ids=LAUNCHES.keys())
def preload(request):
    return request.param


def start(mode="ok", k=2, draft_mode="greedy", preload=None):
    config = {"model": str(MODEL), "dtype": "float64", "num_draft_tokens": k, "draft_mode": draft_mode, "mode": mode}
    return EngineProcess(Path(sys.executable), SERVER, config, {}, f"test-{mode}", preload=preload)


def requests(bundle):
    prompt = tuple(bundle.tokenizer.encode("The import statement is used to"))
    return [
        DecodeRequest(prompt, 12, num_draft_tokens=2, eos_token_ids=bundle.eos_token_ids),
        DecodeRequest(prompt, 12, num_draft_tokens=2, forced_drafts={0: 7, 3: 9}),
        DecodeRequest(prompt, 12, sampling=SamplingConfig(1.0, 50, 0.9), seed=11, num_draft_tokens=2),
    ]


@pytest.fixture(scope="module")
def prefix_bundle():
    from harness.models.loading import bundle_for

    return bundle_for(str(MODEL), "cpu", "float64")


def test_an_engine_process_returns_what_the_decoder_in_it_computes(prefix_bundle, preload):
    batch = requests(prefix_bundle)
    engine = start(preload=preload)
    try:
        assert engine.info == {"name": "harness-mtp", "version": "test"}
        assert engine.decode(batch) == MTPDecoder(prefix_bundle).decode(batch)
        assert engine.decode(batch[:1]) == MTPDecoder(prefix_bundle).decode(batch[:1])  # the process lives on
    finally:
        engine.close()
    assert not engine.alive


def test_a_request_and_a_result_survive_the_wire(prefix_bundle):
    request = requests(prefix_bundle)[1]
    [result] = MTPDecoder(prefix_bundle).decode([request])
    assert parse_result(result_message(result), "here") == result
    assert request_message(request)["forced_drafts"] == {"0": 7, "3": 9}


def test_budget_cut_drafts_survive_the_wire_and_cap_those_passes_only():
    """A pass whose drafts the engine's scheduler cut to its token budget (vLLM under a small max_num_batched_tokens)
    keeps that many drafts in the forced-rejection checks' plan; every other pass keeps the decoder's own cap."""
    result = DecodeResult((5, 6, 7), (), "length", budget_cut_drafts=((1, 1), (9, 0)))
    assert parse_result(result_message(result), "here").budget_cut_drafts == ((1, 1), (9, 0))
    cap = with_budget_cuts(None, result, 4)
    assert [cap(start) for start in (0, 1, 2, 9)] == [4, 1, 4, 0]
    near_the_end = with_budget_cuts(lambda start: 5 - start, result, 4)
    assert [near_the_end(start) for start in (1, 2, 3)] == [1, 3, 2]
    assert with_budget_cuts(None, DecodeResult((5,), (), "length"), 4) is None


def test_an_engine_that_exits_at_start_is_reported_with_its_log(preload):
    with pytest.raises(EngineError, match=r"(?s)exited \(code 3\).*out of memory \(simulated\)"):
        start("exit-at-start", preload=preload)


def test_an_engine_that_cannot_start_reports_its_own_error(preload):
    with pytest.raises(EngineError, match="did not start: ValueError: head_dim 16 is not supported"):
        start("not-ready", preload=preload)


def test_an_engine_that_dies_mid_call_fails_that_call_and_the_pool_starts_a_new_one(prefix_bundle, preload):
    pool = EnginePool()
    dying = pool.get(("k2",), lambda: start("exit-on-decode", preload=preload))
    with pytest.raises(EngineError, match=r"exited \(code 4\) while the harness waited for decode call 1"):
        dying.decode(requests(prefix_bundle)[:1])
    fresh = pool.get(("k2",), lambda: start(preload=preload))
    assert fresh is not dying and fresh.alive
    pool.close()


def test_an_engine_that_writes_something_else_than_json_is_a_protocol_error(prefix_bundle, preload):
    engine = start("garbage", preload=preload)
    try:
        with pytest.raises(EngineProtocolError, match="not JSON: 'this is not JSON"):
            engine.decode(requests(prefix_bundle)[:1])
    finally:
        engine.close()


@pytest.mark.parametrize(
    ("message", "error"),
    [
        ({"token_ids": [1, "2"], "finish_reason": "eos"}, "token_ids must be a list of integers"),
        ({"token_ids": [1, True], "finish_reason": "eos"}, "token_ids must be a list of integers"),
        ({"token_ids": [1, 2.0], "finish_reason": "eos"}, "token_ids must be a list of integers"),
        ({"token_ids": [1], "finish_reason": "eos", "prefill_chunk_ends": [None]}, "prefill_chunk_ends must be"),
        ({"token_ids": [1], "finish_reason": "done"}, "finish_reason must be 'eos', 'length' or 'stop'"),
        ({"token_ids": [1], "finish_reason": "eos", "logprobs": [[1, "x", []]]}, "logprobs must be"),
        ({"token_ids": [1], "finish_reason": "eos", "logprobs": [[1, -0.5, []], [2, -1.0, []]]}, "2 logprobs for 1"),
        ({"token_ids": [1], "finish_reason": "eos", "steps": [{"start": 0, "accepted": 0}]}, "step 0: drafts must be"),
        ({"token_ids": [1], "finish_reason": "eos", "engine_steps": [3]}, "engine_steps has 1 entries for 0 steps"),
        ({"token_ids": [1], "finish_reason": "eos", "engine_steps": ["3"]}, "engine_steps must be a list of integers"),
        ({"token_ids": [1], "finish_reason": "eos", "budget_cut_drafts": [[1]]}, "budget_cut_drafts must be"),
        ({"token_ids": [1], "finish_reason": "eos", "budget_cut_drafts": [[1, -1]]}, "budget_cut_drafts must be"),
    ],
)
def test_a_malformed_result_names_the_field(message, error):
    with pytest.raises(EngineProtocolError, match=error):
        parse_result(message, "engine x, request 0")


def test_the_pool_closes_the_least_recently_used_engine_to_make_room(prefix_bundle, preload):
    pool = EnginePool(max_alive=1)
    first = pool.get(("k2",), lambda: start(preload=preload))
    first.evidence["preemptions"] += 3  # counters the engine sent with its replies
    second = pool.get(("k1",), lambda: start(k=1, preload=preload))
    second.evidence["preemptions"] += 1
    assert not first.alive and second.alive
    assert pool.get(("k1",), lambda: start(preload=preload)) is second
    assert pool.take_evidence() == {"preemptions": 4}, "the closed engine's counters count too"
    assert pool.take_evidence() == {}
    pool.close()


def test_an_engine_with_one_flavour_installs_that_flavour_by_default():
    from harness.subjects.engines.environments import default_flavour
    from harness.subjects.engines.llamacpp.environment import ENVIRONMENT as LLAMACPP

    assert default_flavour(LLAMACPP) == "cpu"  # also on a CUDA machine: llama.cpp's wheel is its CPU build


def test_a_start_that_never_answers_is_killed_and_started_once_more(prefix_bundle, preload):
    """A hung start (no answer by the start timeout) saw nothing the engine computed: the pool kills it and starts the
    engine once more; a second hang fails the call as an engine that did not start."""
    config = {"model": str(MODEL), "dtype": "float64", "num_draft_tokens": 2, "draft_mode": "greedy"}
    modes = iter(["hang-at-start", "ok"])

    def hangs_once():
        mode = next(modes)
        timeout = 3 if mode == "hang-at-start" else 300  # the hung start is given up on at once
        return EngineProcess(Path(sys.executable), SERVER, {**config, "mode": mode}, {}, "test-hang", timeout, preload)

    pool = EnginePool()
    engine = pool.get(("k2",), hangs_once)
    [result] = engine.decode(requests(prefix_bundle)[:1])
    assert result.token_ids and next(modes, "both used") == "both used"
    pool.close()

    def hangs():
        return EngineProcess(
            Path(sys.executable), SERVER, {**config, "mode": "hang-at-start"}, {}, "test-hang", 1, preload
        )

    with pytest.raises(
        EngineStartTimeout, match="no answer after 1 s while the harness waited for the engine to start"
    ):
        EnginePool().get(("k2",), hangs)


def test_engines_started_from_different_tests_share_one_zygote(tmp_path):
    """The zygote is keyed by the server process's environment, less the test's name pytest puts in it: otherwise
    each test would import the engine again in a zygote of its own."""
    from harness.subjects.engines import forked

    env = {"PATH": "/usr/bin", "MTP_HARNESS_X": "1"}
    first = forked.zygote_for(Path(sys.executable), SERVER, {**env, "PYTEST_CURRENT_TEST": "a"}, {}, tmp_path / "a")
    same = forked.zygote_for(Path(sys.executable), SERVER, {**env, "PYTEST_CURRENT_TEST": "b"}, {}, tmp_path / "b")
    other = forked.zygote_for(Path(sys.executable), SERVER, {**env, "MTP_HARNESS_X": "2"}, {}, tmp_path / "c")
    assert first is same and other is not first
