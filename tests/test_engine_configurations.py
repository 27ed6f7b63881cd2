"""Deployed engine configurations (harness/subjects/engines/configurations.py) and the engine suite (suites/engine/):
a configuration is named at the door, shown by the engine's own counters or the check fails, and the suite's checks
fail on a decoder whose MTP state breaks under the configuration. The engine subjects themselves run in .ci/run."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import pytest

from harness.contract.decoder import VerifyStep
from harness.contract.errors import HarnessError
from harness.contract.paths import SUITES_DIR
from harness.decoding.mtp_decoder import MTPDecoder
from harness.subjects import decoder_registry as registry
from harness.subjects.decoder_registry import mutant_decoder
from harness.subjects.engines.configurations import EngineConfiguration, missing_evidence
from harness.subjects.engines.llamacpp.configurations import CONFIGURATIONS as LLAMACPP_CONFIGURATIONS
from harness.subjects.engines.vllm.configurations import CONFIGURATIONS as VLLM_CONFIGURATIONS

pytest_plugins = ["pytester"]


def test_a_configuration_is_known_to_the_engine_of_the_decoder_or_stops_at_the_door(door):
    def engine_configuration(decoder, option):
        return door("engine-config", option, decoder)

    assert engine_configuration("vllm-mtp", "preempt") == "preempt"
    assert engine_configuration("llamacpp-mtp", "prefix-cache") == "prefix-cache"
    assert engine_configuration("mtp", "default") == "default"
    with pytest.raises(
        HarnessError, match=r"--harness-engine-config preempt: llama.cpp has no engine configuration 'preempt'; known: "
    ):
        engine_configuration("llamacpp-mtp", "preempt")
    with pytest.raises(HarnessError, match=r"--harness-engine-config queue: decoder 'mtp' is not an engine"):
        engine_configuration("mtp", "queue")


def test_a_configuration_names_only_counters_an_engine_reports():
    with pytest.raises(ValueError, match="unknown evidence"):
        EngineConfiguration("x", "x", {}, ("cache_hits",))
    for configuration in [*VLLM_CONFIGURATIONS.values(), *LLAMACPP_CONFIGURATIONS.values()]:
        assert configuration.name == "default" or configuration.evidence, f"{configuration.name}: nothing shows it"


def test_a_configuration_happened_only_when_every_counter_it_requires_moved():
    preempt = VLLM_CONFIGURATIONS["preempt"]
    assert missing_evidence(preempt, {"preemptions": 3}) == []
    assert missing_evidence(preempt, {"preemptions": 0, "prefix_cache_hit_tokens": 90}) == ["preemptions"]
    assert missing_evidence(VLLM_CONFIGURATIONS["chunked-prefill"], {"partial_prefills": 4}) == [
        "prefills_beside_decodes"
    ]


@dataclass
class ConfiguredInProcess:
    """The harness's own decoder (or a mutant) posing as an engine subject with deployed configurations, whose
    "engine" reports the counters it is given: the engine suite's machinery, without an engine."""

    inner: MTPDecoder
    counters: dict[str, int]
    configuration: EngineConfiguration = field(default_factory=lambda: VLLM_CONFIGURATIONS["default"])
    engine_configurations = VLLM_CONFIGURATIONS

    @property
    def name(self) -> str:
        return "configured-in-process"

    def decode(self, requests):
        return self.inner.decode(requests)

    def configured(self, name: str) -> ConfiguredInProcess:
        return ConfiguredInProcess(self.inner, self.counters, VLLM_CONFIGURATIONS[name])

    def take_evidence(self) -> dict[str, int]:
        return dict(self.counters)

    def close(self) -> None:
        pass


@pytest.fixture
def engine_run(pytester, monkeypatch):
    """engine_run(decoder factory, test file) -> the pytester result of that engine-suite file on tiny-mimo."""

    def run(factory, test_file: str):
        monkeypatch.setitem(registry.REGISTERED, "configured-in-process", factory)
        return pytester.runpytest_inprocess(
            str(SUITES_DIR / "engine" / test_file),
            "--harness-decoder=configured-in-process",
            "--harness-model=tiny-mimo",
            "--harness-dtype=float64",
            "-p",
            "no:cacheprovider",
            "-q",
        )

    return run


QUEUED = {"steps_with_requests_waiting": 7}


def test_a_check_under_a_configuration_passes_on_the_correct_decoder_when_its_counters_moved(engine_run):
    result = engine_run(
        lambda bundle, device, dtype: ConfiguredInProcess(MTPDecoder(bundle), QUEUED), "test_queueing.py"
    )
    result.assert_outcomes(passed=2)


def test_a_check_whose_configuration_did_not_happen_fails_saying_so(engine_run):
    result = engine_run(lambda bundle, device, dtype: ConfiguredInProcess(MTPDecoder(bundle), {}), "test_queueing.py")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*configuration 'queue' did not happen: the engine's counters*stayed at 0*"])


def test_an_mtp_cache_left_unrolled_under_a_configuration_fails_its_draft_conformance(engine_run):
    def unrolled(bundle, device, dtype):
        return ConfiguredInProcess(mutant_decoder("no-mtp-rollback", bundle), QUEUED)

    result = engine_run(unrolled, "test_queueing.py")
    result.assert_outcomes(failed=1, passed=1)  # its seeded samples do not depend on the schedule
    result.stdout.fnmatch_lines(["*passes proposed drafts the committed prefix does not give*"])


class DraftsNothing(ConfiguredInProcess):
    """A stand-in whose engine stopped drafting: every pass verifies no draft and emits one token (its tokens stay
    right, its passes keep the pass contract)."""

    def decode(self, requests):
        return [
            dataclasses.replace(
                result, steps=tuple(VerifyStep(start, (), 0, (token,)) for start, token in enumerate(result.token_ids))
            )
            for result in self.inner.decode(requests)
        ]

    def configured(self, name: str) -> DraftsNothing:
        return DraftsNothing(self.inner, self.counters, VLLM_CONFIGURATIONS[name])


def test_a_configuration_under_which_the_engine_stops_drafting_fails(engine_run):
    result = engine_run(lambda bundle, device, dtype: DraftsNothing(MTPDecoder(bundle), QUEUED), "test_queueing.py")
    result.assert_outcomes(failed=1, passed=1)  # the seeded samples' check compares tokens only
    result.stdout.fnmatch_lines(["*configured-in-process proposed no drafts under 'queue'*"])


def test_checks_with_and_without_speculation_skip_an_engine_that_does_not_speculate(engine_run):
    class Plain(ConfiguredInProcess):
        speculative = False

        def prompt_logprobs(self, prompts, top):
            raise AssertionError("compared with itself")

    result = engine_run(lambda bundle, device, dtype: Plain(MTPDecoder(bundle), QUEUED), "test_prompt_logprobs.py")
    result.assert_outcomes(skipped=1)


def test_the_engine_suite_skips_the_harness_decoder_with_the_reason(pytester):
    result = pytester.runpytest_inprocess(
        str(SUITES_DIR / "engine"), "--harness-decoder=mtp", "-p", "no:cacheprovider", "-rs"
    )
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*decoder 'mtp' has no deployed engine configurations*"])


def test_vllms_scheduler_watch_counts_what_the_scheduler_did_from_its_own_state():
    """harness/subjects/engines/vllm/server.py SchedulerWatch on a stand-in scheduler (the attributes it reads of
    vLLM 0.32.0's Scheduler, SchedulerOutput and Request): a request that found 64 prompt tokens cached, one whose
    prefill stopped inside its prompt beside a decoding one, a preemption and a request left waiting."""
    from types import SimpleNamespace as Stub

    from harness.subjects.engines.vllm.recorder import HARNESS_KEY
    from harness.subjects.engines.vllm.server import SchedulerWatch

    def request(key, prompt, computed, drafts=(), outputs=0, request_id=""):  # computed: after this step's tokens
        params = Stub(extra_args={HARNESS_KEY: {"key": key}})
        return Stub(
            request_id=request_id,
            num_prompt_tokens=prompt,
            num_computed_tokens=computed,
            sampling_params=params,
            spec_token_ids=list(drafts),
            num_output_tokens=outputs,
        )

    # c decodes with 3 drafts of which the step's token budget kept 2; g, at the context end, keeps none of its 2 there
    requests = {
        "a": request("b1-r0", 100, 96),
        "b": request("b1-r1", 40, 32),
        "c": request("b1-r2", 10, 30, drafts=(7, 8, 9), outputs=20, request_id="c"),
        "g": request("b1-r3", 10, 255, drafts=(7, 8), outputs=244, request_id="g"),
    }
    scheduler = Stub(
        requests=requests,
        waiting=["d"],
        running=[requests["c"], requests["g"]],
        max_model_len=256,
        num_sampled_tokens_per_step=1,
    )
    outputs = [
        Stub(
            scheduled_new_reqs=[Stub(num_computed_tokens=64), Stub(num_computed_tokens=0)],
            preempted_req_ids={"e"},
            # a: 64 -> 96 (a chunk), b: 0 -> 32, c: decoding 27 -> 30, g: decoding 254 -> 255 (the context's end)
            num_scheduled_tokens={"a": 32, "b": 32, "c": 3, "g": 1},
            scheduled_spec_decode_tokens={"c": [7, 8]},
        )
    ]
    scheduler.schedule = lambda: outputs.pop()
    watch = SchedulerWatch(scheduler)
    scheduler.schedule()
    assert watch.budget_cuts == {"b1-r2": [[20, 2]]}, "a pass cut to the budget, not one cut at the context end"
    assert watch.take() == {
        "prefix_cache_hit_tokens": 64,
        "preemptions": 1,
        "partial_prefills": 2,
        "prefills_beside_decodes": 1,
        "steps_with_requests_waiting": 1,
    }
    assert watch.chunk_ends == {"b1-r0": [96], "b1-r1": [32]}
    assert watch.take() == {}, "a take starts the counts afresh"
