"""The harness's two interventions inside vLLM's process, on either of vLLM's model runners: forced drafts and
per-pass records (server.py installs them on every worker). Standard library and what vLLM's process holds (torch);
nothing of the harness.

- forced drafts: the MTP drafter's per-position draft sampler is wrapped so that a draft for an output position the
  request forces becomes the forced token, with a one-hot q where the drafter keeps draft probabilities; later drafts
  of the same pass are then drafted from it, as the contract says;
- per-pass records: the runner's verification call (the rejection sampler, or the plain sampler on a pass without
  drafts) is wrapped to record, per request and pass, the drafts verification read, the tokens it returned
  (accepted drafts + the target's token) and the engine step it ran in (the verification calls counted: passes with
  the same number were verified together).

Neither changes what vLLM computes for a request that forces nothing (tests/test_vllm_subject.py compares).

Model Runner V1 (vllm/v1/worker/gpu_model_runner.py; the CPU build's default): `drafter._sample_draft_tokens`,
`runner._sample`, the drafts from the scheduler output. Model Runner V2 (vllm/v1/worker/gpu/model_runner.py; what
vLLM picks on CUDA): `speculator.sample_draft` (draft step `draft_step`, probabilistic drafts' q cached as logits in
`draft_logits[slot, step]`), `runner.sample` (returns the sampled tokens and how many per row), the drafts from the
runner's own `req_states.draft_tokens` (the scheduler holds placeholders under V2), and no SamplingParams per
request: their extra_args are read as requests arrive (`runner.add_requests`).
"""

from __future__ import annotations

HARNESS_KEY = "mtp_harness"  # extra_args key of a harness request: {"key": ..., "forced": {position: token}}
# (with n samples also "seed" and "n": vLLM fans the request out into n children sharing its extra_args, child i
# seeded seed + i (vllm/v1/engine/parallel_sampling.py), and each child's passes are kept under sample_key)


def sample_key(key: str, index: int) -> str:
    """The key of sample `index` of a request asking for n > 1 samples."""
    return f"{key}#{index}"


NEG_INF = float("-inf")


def runner_version(runner) -> str:  # noqa: ANN001 - vLLM's model runner
    """ "v2" for Model Runner V2 (it keeps per-request state in `req_states`), else "v1"."""
    return "v2" if hasattr(runner, "req_states") else "v1"


def recorder_for(runner):  # noqa: ANN001, ANN201 - vLLM's model runner -> a StepRecorder
    return RunnerV2Recorder() if runner_version(runner) == "v2" else RunnerV1Recorder()


class StepRecorder:
    """What both runners' recorders keep: each request's passes (drafts, verified tokens) and its output tokens
    verified so far, by the harness's request key."""

    def __init__(self) -> None:
        self.passes: dict[str, list[tuple[list[int], list[int], int]]] = {}  # key -> [(drafts, verified, step)]
        self.engine_step = -1  # the verification calls so far, less one: the number of the step being recorded
        self.committed: dict[str, int] = {}  # key -> output tokens verified so far (before truncation)
        # whether a request of the batch being decoded forces a draft (server.py sets it per batch): without one, the
        # wrapped draft sampler returns the drafter's output without looking at a row
        self.forcing = True
        self.args_cache: dict[str, dict | None] = {}  # vLLM request id -> harness_args, for the last pass's requests

    def extra_args(self, req_id: str) -> dict:
        """A request's SamplingParams.extra_args (the harness's and the scoring hook's keys)."""
        raise NotImplementedError

    def request_seed(self, req_id: str) -> int | None:
        """The seed of a request's own SamplingParams (a child of an n-sample request: the parent's seed + index)."""
        raise NotImplementedError

    def harness_args(self, req_id: str) -> dict | None:
        args = self.extra_args(req_id).get(HARNESS_KEY)
        if not args or args.get("n", 1) == 1:
            return args
        return {**args, "key": sample_key(args["key"], int(self.request_seed(req_id)) - int(args["seed"]))}

    def batch_args(self, req_ids: list[str]) -> list[dict | None]:
        """harness_args of each request of a pass, looked up once per request while it stays in the batch (a
        request's SamplingParams do not change); the cache then holds this pass's requests only."""
        self.args_cache = {req_id: self.cached_args(req_id) for req_id in req_ids}
        return [self.args_cache[req_id] for req_id in req_ids]

    def cached_args(self, req_id: str) -> dict | None:
        """harness_args through the cache, adding what it lacks (batch_args prunes it at the next pass)."""
        if req_id not in self.args_cache:
            self.args_cache[req_id] = self.harness_args(req_id)
        return self.args_cache[req_id]

    def note(self, key: str, drafts: list[int], verified: list[int]) -> None:
        self.passes.setdefault(key, []).append((drafts, verified, self.engine_step))
        self.committed[key] = self.committed.get(key, 0) + len(verified)

    def forced_token(self, args: dict | None, draft_step: int) -> int | None:
        """The token a request forces at the output position of draft step `draft_step` of its current pass."""
        if not args or not args["forced"]:
            return None
        forced = args["forced"].get(str(self.committed.get(args["key"], 0) + draft_step))
        return None if forced is None else int(forced)

    def take_steps(self, key: str, tokens: list[int]) -> list[dict]:
        """The request's passes, each cut to the tokens the engine committed (EOS / max_tokens truncation), with
        the engine step that verified it."""
        steps, start = [], 0
        for drafts, verified, engine_step in self.passes.pop(key, []):
            emitted = verified[: max(0, len(tokens) - start)]
            if not emitted:
                break
            steps.append(
                {
                    "start": start,
                    "drafts": drafts,
                    "accepted": len(verified) - 1,
                    "emitted": emitted,
                    "engine_step": engine_step,
                }
            )
            start += len(emitted)
        self.committed.pop(key, None)
        return steps


class RunnerV1Recorder(StepRecorder):
    """Model Runner V1: the drafter's per-position sampler, the runner's `_sample`, the scheduler's drafts."""

    def __init__(self) -> None:
        super().__init__()
        self.draft_index = 0

    def install(self, worker) -> None:  # noqa: ANN001 - vLLM's worker (wrapper)
        runner = worker.model_runner
        self.runner = runner
        self.scheduler_output = None
        execute_model, sample = runner.execute_model, runner._sample

        def recorded_execute_model(scheduler_output, *args, **kwargs):  # noqa: ANN001
            self.scheduler_output = scheduler_output
            return execute_model(scheduler_output, *args, **kwargs)

        def recorded_sample(logits, spec_decode_metadata):  # noqa: ANN001
            output = sample(logits, spec_decode_metadata)
            self.record(output.sampled_token_ids)
            return output

        runner.execute_model = recorded_execute_model
        runner._sample = recorded_sample
        drafter = getattr(runner, "drafter", None)
        if drafter is not None:
            propose, sample_drafts = drafter.propose, drafter._sample_draft_tokens

            def counted_propose(*args, **kwargs):
                self.draft_index = 0
                return propose(*args, **kwargs)

            def forced_sample_drafts(hidden_states, sampling_metadata):  # noqa: ANN001
                tokens, probs = sample_drafts(hidden_states, sampling_metadata)
                self.force(tokens, probs)
                self.draft_index += 1
                return tokens, probs

            drafter.propose = counted_propose
            drafter._sample_draft_tokens = forced_sample_drafts

    def extra_args(self, req_id: str) -> dict:
        state = self.runner.requests.get(req_id)
        return getattr(getattr(state, "sampling_params", None), "extra_args", None) or {}

    def request_seed(self, req_id: str) -> int | None:
        return getattr(getattr(self.runner.requests.get(req_id), "sampling_params", None), "seed", None)

    def record(self, sampled) -> None:  # noqa: ANN001 - torch.Tensor [num_reqs, max_spec_len + 1], -1 = none
        self.engine_step += 1
        rows = sampled.tolist()
        scheduled = self.scheduler_output.scheduled_spec_decode_tokens if self.scheduler_output else {}
        req_ids = self.runner.input_batch.req_ids
        discard = getattr(self.runner, "discard_request_mask", None)
        discarded = discard.np[: len(req_ids)].tolist() if discard is not None else [False] * len(req_ids)
        for row, (req_id, args) in enumerate(zip(req_ids, self.batch_args(req_ids), strict=True)):
            if args is None:
                continue
            if discarded[row]:
                continue  # a partial prefill: nothing was sampled for this request
            drafts = [int(t) for t in scheduled.get(req_id, []) if t >= 0]
            self.note(args["key"], drafts, [int(t) for t in rows[row][: len(drafts) + 1] if t >= 0])

    def force(self, tokens, probs) -> None:  # noqa: ANN001 - torch.Tensor [B], [B, V] or None
        if not self.forcing:
            return
        for row, req_id in enumerate(self.runner.input_batch.req_ids[: tokens.shape[0]]):
            forced = self.forced_token(self.cached_args(req_id), self.draft_index)
            if forced is None:
                continue
            tokens[row] = forced
            if probs is not None:  # the law the draft was drawn from: one-hot on the forced token
                probs[row].zero_()
                probs[row, forced] = 1.0


class RunnerV2Recorder(StepRecorder):
    """Model Runner V2: the speculator's per-position sampler, the runner's `sample`, the runner's own drafts, and
    the requests' extra_args noted as they arrive."""

    def __init__(self) -> None:
        super().__init__()
        self.arrived: dict[str, dict] = {}  # vLLM request id -> its extra_args (a resumed request arrives again)
        self.arrived_seeds: dict[str, int | None] = {}  # vLLM request id -> its SamplingParams' seed

    def install(self, worker) -> None:  # noqa: ANN001 - vLLM's worker (wrapper)
        runner = worker.model_runner
        self.runner = runner
        add_requests, sample = runner.add_requests, runner.sample

        def noted_add_requests(scheduler_output):  # noqa: ANN001
            for new in scheduler_output.scheduled_new_reqs:
                self.arrived[new.req_id] = getattr(new.sampling_params, "extra_args", None) or {}
                self.arrived_seeds[new.req_id] = getattr(new.sampling_params, "seed", None)
            return add_requests(scheduler_output)

        def recorded_sample(hidden_states, input_batch, grammar_output):  # noqa: ANN001
            result = sample(hidden_states, input_batch, grammar_output)
            sampler_output, num_sampled, _ = result
            self.record(input_batch, sampler_output.sampled_token_ids, num_sampled)
            return result

        runner.add_requests = noted_add_requests
        runner.sample = recorded_sample
        speculator = getattr(runner, "speculator", None)
        if speculator is not None:
            sample_draft = speculator.sample_draft

            def forced_sample_draft(
                hidden_states,  # noqa: ANN001
                sample_src_positions,  # noqa: ANN001
                idx_mapping,  # noqa: ANN001
                temperature,  # noqa: ANN001
                seeds,  # noqa: ANN001
                draft_step,  # noqa: ANN001
                draft_logits,  # noqa: ANN001
                *args,
                **kwargs,
            ):
                tokens = sample_draft(
                    hidden_states, sample_src_positions, idx_mapping, temperature, seeds, draft_step, draft_logits,
                    *args, **kwargs,
                )  # fmt: skip
                self.force(tokens, idx_mapping, int(draft_step), draft_logits)
                return tokens

            speculator.sample_draft = forced_sample_draft

    def extra_args(self, req_id: str) -> dict:
        return self.arrived.get(req_id, {})

    def record(self, input_batch, sampled, num_sampled) -> None:  # noqa: ANN001 - V2's InputBatch, tensors
        self.engine_step += 1
        counts = input_batch.num_draft_tokens_per_req  # [num_reqs] or None: no drafts in this pass
        draft_table = self.runner.req_states.draft_tokens  # [max_num_reqs, k]: each slot's drafts of this pass
        rows, num_sampled = sampled.tolist(), num_sampled.tolist()
        for row, req_id in enumerate(input_batch.req_ids):
            args = self.harness_args(req_id)
            if args is None or num_sampled[row] == 0:
                continue  # not the harness's, or a partial prefill (chunked): nothing sampled
            drafted = int(counts[row]) if counts is not None else 0
            slot = int(input_batch.idx_mapping_np[row])
            drafts = [int(t) for t in draft_table[slot, :drafted].tolist()]
            self.note(args["key"], drafts, [int(t) for t in rows[row][: num_sampled[row]]])

    def force(self, tokens, idx_mapping, draft_step: int, draft_logits) -> None:  # noqa: ANN001 - tensors
        if not self.forcing:
            return
        index_to_req_id = self.runner.req_states.index_to_req_id
        for row, slot in enumerate(idx_mapping.tolist()):
            req_id = index_to_req_id.get(slot)  # slot -1: a padded row
            forced = None if req_id is None else self.forced_token(self.harness_args(req_id), draft_step)
            if forced is None:
                continue
            tokens[row] = forced
            if draft_logits is not None:  # probabilistic drafts: q cached as logits; one-hot on the forced token
                draft_logits[slot, draft_step].fill_(NEG_INF)
                draft_logits[slot, draft_step, forced] = 0.0

    def request_seed(self, req_id: str) -> int | None:
        return self.arrived_seeds.get(req_id)

    def take_steps(self, key: str, tokens: list[int]) -> list[dict]:
        request = key.split("#")[0]  # a sample's passes: its request's arrivals go (the samples are taken together)
        self.arrived = {req_id: extra for req_id, extra in self.arrived.items() if _key(extra) != request}
        self.arrived_seeds = {req_id: seed for req_id, seed in self.arrived_seeds.items() if req_id in self.arrived}
        return super().take_steps(key, tokens)


def _key(extra: dict) -> str | None:
    return (extra.get(HARNESS_KEY) or {}).get("key")
