"""The vLLM engine server: runs inside vLLM's own environment and speaks the harness's wire protocol.

This file is executed by the vLLM environment's Python (`python server.py`): it needs only the standard library,
vLLM (imported inside the engine) and the servers' shared loop (harness/subjects/engines/serving/server_loop.py).
The harness imports it only for `llm_arguments`, to write the same engine configuration into a vLLM-alone
reproducer (reproducer.py).

The protocol (harness/subjects/engines/wire.py) is JSON lines: the first stdin line is the engine configuration,
then one operation per line (`decode`, and the scoring operations of --reference engine); every reply is one stdout
line. Everything vLLM prints goes to stderr.

vLLM is tested as shipped. The server makes exactly two interventions, both inside the engine process, on whichever
model runner vLLM runs (V1, or V2 with --engine-runner v2; recorder.py): forced drafts (the MTP drafter's per-
position draft sampler is wrapped so that a draft for an output position the request forces becomes the forced
token, with a one-hot q; later drafts of the same pass are drafted from it) and per-pass records (the runner's
verification call is wrapped to record, per request and pass, the drafts verification read and the tokens it
returned). Neither changes what vLLM computes for a request without forced drafts. Both are installed on every
worker's model runner (`install_hooks`; with tensor parallelism the workers are processes of their own) and read
back from the first worker. The runner is chosen explicitly (VLLM_USE_V2_MODEL_RUNNER); V2 on a CPU first gets what
it needs to start (cpu_triton.py: Triton's interpreter; an enabling shim, not a change to what vLLM computes). Under
--reference engine a third hook reads and changes nothing: the model runner's prompt-logprob method is wrapped to
compute, for the harness's scoring requests only, the sampling statistics from the full logits (scoring.py).
Besides, the server watches the scheduler (a wrapper that reads its state after each `schedule()`, and changes
nothing) for the evidence that a deployed configuration happened (harness/subjects/engines/configurations.py):
prefix-cache hits, prompts prefilled in chunks beside decoding requests, preemptions, requests left waiting. Each
reply carries the counters of its call.
"""

from __future__ import annotations

import collections
import json
import os
import sys

if __package__:  # imported by the harness (llm_arguments for the reproducer, the scheduler watch's unit test)
    from harness.subjects.engines.vllm.recorder import HARNESS_KEY, sample_key
else:  # run as the server script in vLLM's environment, beside recorder.py
    from recorder import HARNESS_KEY, sample_key

# Set by an Engine of Model Runner V2 on a CPU: vLLM's CPU platform starts its tensor- or pipeline-parallel workers
# with multiprocessing's spawn (vllm/platforms/cpu.py), which runs this script again in each worker as __mp_main__
# before the worker imports vLLM; the worker needs the same enabling shim (cpu_triton.py) as this process.
V2_CPU_SHIM = "MTP_HARNESS_V2_CPU_SHIM"
if __name__ == "__mp_main__" and os.environ.get(V2_CPU_SHIM) == "1":
    from cpu_triton import enable_model_runner_v2_on_cpu

    enable_model_runner_v2_on_cpu()

FINISH_REASONS = {"stop": "eos", "length": "length"}  # vLLM's -> the contract's (stop_token_ids: the EOS ids)


# vLLM ends a request "error" when its structured output's grammar refuses a token the request sampled (the scheduler
# logs "grammar rejected tokens ... Terminating request"): the decode call fails with this text
GRAMMAR_TERMINATED = "vLLM terminated a constrained request: its grammar refused a sampled token"


def finish_reason(completion, constrained: bool = False) -> str:  # noqa: ANN001 - vLLM's CompletionOutput
    """The contract's finish reason: vLLM says "stop" for a stop token and a stop string alike, and names the string
    it matched in stop_reason."""
    if completion.finish_reason == "error" and constrained:
        raise RuntimeError(f"a request ended with finish_reason 'error': {GRAMMAR_TERMINATED}")
    if completion.finish_reason not in FINISH_REASONS:
        raise RuntimeError(f"a request ended with finish_reason {completion.finish_reason!r}")
    if completion.finish_reason == "stop" and isinstance(completion.stop_reason, str):
        return "stop"
    return FINISH_REASONS[completion.finish_reason]


# the request features SamplingParams takes as they are (the wire's names are vLLM's)
FEATURE_PARAMETERS = ("repetition_penalty", "frequency_penalty", "presence_penalty", "min_p", "min_tokens")
# the scoring hook's log-softmax (float64) against vLLM's prompt logprobs (float32) of the same logits: rounding is
# ~1e-6; rows taken from the wrong place differ by whole nats
SCORING_TOLERANCE = 1e-3


def main() -> None:
    from server_loop import serve  # on this process's PYTHONPATH (harness/subjects/engines/serving/)

    serve(
        Engine,
        {
            "decode": lambda engine, message: engine.decode(message["requests"]),
            "prompt_logprobs": lambda engine, message: engine.prompt_logprobs(message["prompts"], int(message["top"])),
            "sequence_terms": lambda engine, message: engine.sequence_terms(
                message["prompt_length"], message["sequences"], message["sampling"]
            ),
            "next_token_laws": lambda engine, message: engine.next_token_laws(
                message["prefixes"], message["sampling"], message["threshold"]
            ),
        },
    )


def speculative_config(config: dict) -> dict | None:
    """vLLM's speculative_config for the harness's engine configuration (None: no speculation)."""
    k = int(config.get("num_draft_tokens", 0))
    if not k:
        return None
    return {
        "method": "mtp",
        "num_speculative_tokens": k,
        "draft_sample_method": "probabilistic" if config.get("draft_mode") == "sample" else "greedy",
    }


# the deployed configurations' settings (harness/subjects/engines/configurations.py) that are LLM arguments as they are
SCHEDULER_SETTINGS = (
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "max_num_batched_tokens",
    "num_gpu_blocks_override",
    "block_size",
    "async_scheduling",
)


def llm_arguments(config: dict) -> dict:
    """The keyword arguments of vLLM's LLM for the harness's engine configuration."""
    settings = {name: config[name] for name in SCHEDULER_SETTINGS if name in config}
    return {
        "model": config["model"],
        "dtype": config.get("dtype", "float32"),
        "max_model_len": int(config["max_model_len"]),
        "speculative_config": speculative_config(config),
        "seed": int(config.get("seed", 0)),
        "enforce_eager": bool(config.get("enforce_eager", True)),
        "async_scheduling": False,  # each pass's drafts are then in the scheduler output the recorder reads
        # requests arrive as token ids and EOS comes from the request; the tokenizer detokenizes the requests with stop
        # strings (and only them: the others ask for detokenize=False)
        "skip_tokenizer_init": False,
        # JSON schemas constrain to compact JSON, as the harness's contract (StructuredOutput) says: the engine's own
        # switch, which vLLM reads from here (not from a request) and takes only with a named backend: xgrammar, the
        # one its default ("auto") picks for regexes, JSON schemas and GBNF grammars
        "structured_outputs_config": {"backend": "xgrammar", "disable_any_whitespace": True},
        "max_num_seqs": int(config.get("max_num_seqs", 256)),
        "kv_cache_memory_bytes": int(config.get("kv_cache_bytes", 256 * 2**20)),  # small models, small cache
        "disable_log_stats": True,
        **settings,
        **config.get("engine_args", {}),  # the run's own vLLM arguments (--engine-arg), none the harness sets
    }


def prepare_process(config: dict) -> None:
    """What must be set before vLLM is imported, then the import: the engine core in this process, the model runner
    asked for, V2's enabling shim on a CPU. Run by Engine, and by the zygote a vLLM server is forked from
    (harness/subjects/engines/serving/zygote.py) with the runner and platform alone, before any configuration
    arrives; idempotent."""
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core runs in this process
    runner = config.get("runner")  # v1 or v2: the model runner the run asked for (else vLLM's own choice)
    if runner is not None:
        os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1" if runner == "v2" else "0"
    if runner == "v2" and config.get("platform") == "cpu":
        from cpu_triton import enable_model_runner_v2_on_cpu  # beside this file; before vLLM is imported

        enable_model_runner_v2_on_cpu()
        os.environ[V2_CPU_SHIM] = "1"  # and in every worker process vLLM spawns (above)
    import vllm  # imported here once, before an engine is built
    from vllm import LLM  # noqa: F401 - LLM's own imports (the engine, the model executor)

    if config.get("platform") == "cpu":  # the CPU worker's modules, which LLM() imports when it builds its worker:
        import vllm.v1.worker.cpu_worker  # in the zygote once (measured: LLM() 1.9 s -> 1.3 s forked)

        if runner == "v2":  # and V2's model runner, which the worker imports when it is built (its Triton kernels)
            import vllm.v1.worker.cpu.model_runner  # noqa: F401


class Engine:
    """One vLLM LLM instance (in this process) with the harness's hooks installed on its model runner."""

    def __init__(self, config: dict) -> None:
        prepare_process(config)
        import vllm
        from vllm import LLM

        self.config = config
        self.version = vllm.__version__
        self.llm = LLM(**llm_arguments(config))
        # the hooks live on every worker's model runner (with tensor or pipeline parallelism, workers are processes of
        # their own); what they recorded is read back from the first worker (install_hooks, on_first_worker)
        self.runner = self.llm.collective_rpc(install_hooks)[0]  # the model runner the hooks were installed on
        self.scheduler = SchedulerWatch(self.llm.llm_engine.engine_core.engine_core.scheduler)
        self.largest_mismatch = 0.0
        self.batches = 0

    def on_first_worker(self, function, *args):  # noqa: ANN001, ANN201 - a function of (worker, *args)
        """Run `function(worker, *args)` on every worker (each drops what it read) and return the first worker's
        result: the rank whose model runner output vLLM's scheduler uses."""
        return self.llm.collective_rpc(function, args=args)[0]

    def effective(self) -> dict:
        """The scheduler settings vLLM runs with (after its platform's adjustments)."""
        vllm_config = self.llm.llm_engine.vllm_config
        scheduler, cache = vllm_config.scheduler_config, vllm_config.cache_config
        return {
            "enable_prefix_caching": bool(cache.enable_prefix_caching),
            "enable_chunked_prefill": bool(scheduler.enable_chunked_prefill),
            "max_num_batched_tokens": int(scheduler.max_num_batched_tokens),
            "max_num_seqs": int(scheduler.max_num_seqs),
            "num_gpu_blocks": cache.num_gpu_blocks,
            "block_size": cache.block_size,
            "max_model_len": int(vllm_config.model_config.max_model_len),
            "async_scheduling": bool(scheduler.async_scheduling),
            "max_logprobs": int(vllm_config.model_config.max_logprobs),
        }

    def describe(self) -> dict:
        fixes = getattr(sys.modules.get("sitecustomize"), "APPLIED", [])  # under --engine-fixes only (serving/fixes/)
        return {
            "name": "vllm",
            "version": self.version,
            "config": self.config,
            "fixes": sorted(fixes),
            "runner": self.runner,
            "effective": self.effective(),
        }

    def take_evidence(self) -> dict:
        counters = self.scheduler.take()
        effective = self.effective()
        counters["async_scheduling"] = int(effective["async_scheduling"])
        counters["prefix_caching"] = int(effective["enable_prefix_caching"])
        counters["chunked_prefill"] = int(effective["enable_chunked_prefill"])
        counters["preemptible"] = int(effective["block_size"] < effective["max_model_len"])
        return counters

    def prompt_logprobs(self, prompts: list[list[int]], top: int) -> list[list[dict | None]]:
        """Per prompt and position: vLLM's log-probabilities of the prompt token there and of the `top` most likely
        tokens (token id as a string -> logprob), None at position 0.

        vLLM scores a prompt only with room for one output token. A sequence that fills the context (max_model_len
        tokens) is scored without its last token, and its last position comes from the one output token's
        log-probabilities: the `top` most likely there and the token vLLM's greedy sampler took (which is the
        sequence's own last token only where that is the greedy one)."""
        from vllm import SamplingParams

        limit = int(self.config["max_model_len"])
        full = [len(p) >= limit for p in prompts]
        scored = [list(p[:-1]) if is_full else list(p) for p, is_full in zip(prompts, full, strict=True)]
        params = [
            SamplingParams(
                max_tokens=1, temperature=0.0, prompt_logprobs=top, logprobs=top if is_full else None, detokenize=False
            )
            for is_full in full
        ]
        outputs = self.llm.generate([{"prompt_token_ids": p} for p in scored], params, use_tqdm=False)

        def row(entry) -> dict | None:  # noqa: ANN001 - vLLM's {token id: Logprob} or None
            return None if entry is None else {str(t): float(lp.logprob) for t, lp in entry.items()}

        rows = []
        for output, is_full in zip(outputs, full, strict=True):
            rows.append([row(entry) for entry in output.prompt_logprobs])
            if is_full:
                rows[-1].append(row(output.outputs[0].logprobs[0]))
        return rows

    def scored(self, sequences: list[list[int]], asked: dict) -> list[dict]:
        """Score each sequence inside this process (scoring.py): one request each for prompt = the sequence,
        max_tokens 1, its prompt log-probabilities on; the hook's results, checked against vLLM's own."""
        from scoring import HARNESS_SCORE
        from vllm import SamplingParams

        self.batches += 1
        keys = [f"s{self.batches}-{i}" for i in range(len(sequences))]
        params = [
            SamplingParams(
                max_tokens=1,
                temperature=0.0,
                prompt_logprobs=0,
                detokenize=False,
                extra_args={HARNESS_SCORE: {**asked, "key": key, "sequence": [int(t) for t in sequence]}},
            )
            for key, sequence in zip(keys, sequences, strict=True)
        ]
        outputs = self.llm.generate([{"prompt_token_ids": list(s)} for s in sequences], params, use_tqdm=False)
        theirs = [
            [float(entry[sequence[j]].logprob) for j, entry in enumerate(output.prompt_logprobs) if j > 0]
            for sequence, output in zip(sequences, outputs, strict=True)
        ]
        results, mismatch = self.on_first_worker(take_scores, keys, theirs)
        self.largest_mismatch = max(self.largest_mismatch, mismatch)
        if self.largest_mismatch > SCORING_TOLERANCE:
            raise RuntimeError(
                f"the scoring hook's logits are not vLLM's: its log-probabilities differ from vLLM's prompt "
                f"log-probabilities by {self.largest_mismatch:.3g} (> {SCORING_TOLERANCE})"
            )
        return results

    def sequence_terms(self, prompt_length: int, sequences: list[list[int]], sampling: list) -> dict:
        """The whole-sequence statistics' per-token terms of each sequence's continuation (after prompt_length
        tokens) under the processed law `sampling` (temperature, top_k, top_p), and the cumulant tables summed
        over the sequences per position (scoring.py)."""
        import torch

        asked = {"what": "terms", "prompt_length": int(prompt_length), "sampling": list(sampling)}
        results = self.scored(sequences, asked)
        width = max((len(s) - prompt_length for s in sequences), default=0)
        summed = None
        terms = []
        for result in results:
            own = result.get("terms", {})
            terms.append([list(own[t]) for t in sorted(own)])
            for t, table in result.get("tables", {}).items():
                if summed is None:
                    summed = torch.zeros((width, *table.shape), dtype=torch.float64)
                summed[t] += table
        return {
            "terms": terms,
            "tables": [] if summed is None else summed.tolist(),
            "largest_logprob_mismatch": self.largest_mismatch,
        }

    def next_token_laws(self, prefixes: list[list[int]], sampling: list, threshold: float) -> list[dict]:
        """The processed law (`sampling`) of the token after each prefix: its tokens of probability >= threshold
        and the mass of the rest. Each prefix is scored with a stand-in token after it (its row is the law)."""
        asked = {"what": "law", "sampling": list(sampling), "threshold": float(threshold)}
        results = self.scored([[*prefix, 0] for prefix in prefixes], asked)
        return [{"law": result["law"], "rest": result["rest"]} for result in results]

    def decode(self, requests: list[dict]) -> list[dict]:
        engine = self.llm.llm_engine
        self.batches += 1
        self.on_first_worker(set_forcing, any(request.get("forced_drafts") for request in requests))
        ids = []
        for index, request in enumerate(requests):
            request_id = f"b{self.batches}-r{index}"
            forced = request.get("forced_drafts", {})
            n = int(request.get("n", 1))
            args = {"key": request_id, "forced": forced, **({"seed": int(request["seed"]), "n": n} if n > 1 else {})}
            params = sampling_params(request, {HARNESS_KEY: args})
            engine.add_request(request_id, {"prompt_token_ids": [int(t) for t in request["prompt_ids"]]}, params)
            ids.append(request_id)
        finished = {}
        while engine.has_unfinished_requests():
            for output in engine.step():
                if output.finished:
                    finished[output.request_id] = output
        # each request's completions in sample order, under the keys the recorder kept their passes by
        samples = {}
        for request_id, request in zip(ids, requests, strict=True):
            completions = sorted(finished[request_id].outputs, key=lambda completion: completion.index)
            if int(request.get("n", 1)) == 1:
                samples[request_id] = {request_id: completions[0]}
            else:
                samples[request_id] = {sample_key(request_id, c.index): c for c in completions}
        tokens = {
            key: [int(t) for t in completion.token_ids]
            for completions in samples.values()
            for key, completion in completions.items()
        }
        steps = self.on_first_worker(take_steps, tokens)
        results = []
        for request_id, request in zip(ids, requests, strict=True):
            constrained = request.get("structured_output") is not None
            sampled = [
                {
                    "token_ids": tokens[key],
                    "finish_reason": finish_reason(completion, constrained),
                    "steps": steps[key],
                    "engine_steps": [step.pop("engine_step") for step in steps[key]],
                    "prefill_chunk_ends": self.scheduler.chunk_ends.pop(request_id, []),
                    "budget_cut_drafts": self.scheduler.budget_cuts.pop(request_id, []),
                    **(
                        {"logprobs": token_logprobs(completion, int(request["logprobs"]))}
                        if request.get("logprobs") is not None
                        else {}
                    ),
                }
                for key, completion in samples[request_id].items()
            ]
            results.append({**sampled[0], "samples": sampled} if len(sampled) > 1 else sampled[0])
        return results


def sampling_params(request: dict, extra_args: dict | None = None):  # noqa: ANN201 - vLLM's SamplingParams
    """vLLM's SamplingParams for a wire request (and the harness's extra_args; generate_alone.py passes none)."""
    from vllm import SamplingParams
    from vllm.sampling_params import RequestOutputKind

    return SamplingParams(
        n=int(request.get("n", 1)),  # vLLM fans n samples out itself, sample i seeded seed + i
        output_kind=RequestOutputKind.FINAL_ONLY,  # LLM.generate's: a request's outputs once, all its samples in it
        temperature=float(request["temperature"]),
        top_k=int(request["top_k"]),
        top_p=float(request["top_p"]),
        seed=int(request["seed"]),
        max_tokens=int(request["max_new_tokens"]),
        ignore_eos=True,  # only the request's own EOS ids stop it
        stop_token_ids=[int(t) for t in request["eos_token_ids"]],
        stop=[str(text) for text in request.get("stop_strings", [])] or None,
        detokenize=bool(request.get("stop_strings")),  # vLLM reads stop strings in the detokenized text
        extra_args=extra_args,
        **{name: request[name] for name in FEATURE_PARAMETERS if name in request},
        logit_bias={int(token): float(bias) for token, bias in request.get("logit_bias", [])} or None,
        logprobs=request.get("logprobs"),
        structured_outputs=structured_outputs(request.get("structured_output")),
    )


def structured_outputs(constraint: dict | None):  # noqa: ANN201 - vLLM's StructuredOutputsParams
    """vLLM's structured outputs for the wire's constraint: a regex, a JSON schema, a grammar (GBNF, which vLLM's
    default xgrammar backend reads as it is)."""
    if constraint is None:
        return None
    from vllm.sampling_params import StructuredOutputsParams

    field = {"regex": "regex", "json_schema": "json", "gbnf": "grammar"}[constraint["kind"]]
    spec = json.loads(constraint["spec"]) if constraint["kind"] == "json_schema" else str(constraint["spec"])
    return StructuredOutputsParams(**{field: spec})


def token_logprobs(completion, top: int) -> list:  # noqa: ANN001 - vLLM's CompletionOutput
    """The wire's logprobs of a completion: per output token, its logprob and the `top` ranked tokens' (vLLM returns
    the sampled token's beside the top ones, ranked 1..top)."""
    rows = []
    for token, entry in zip(completion.token_ids, completion.logprobs, strict=True):
        ranked = sorted((item.rank, int(t), float(item.logprob)) for t, item in entry.items() if item.rank <= top)
        rows.append([int(token), float(entry[token].logprob), [[t, value] for _, t, value in ranked]])
    return rows


def install_hooks(worker) -> str:  # noqa: ANN001 - vLLM's worker (wrapper), in its own process under parallelism
    """On one worker: the step recorder (forcing and recording) and the scoring hook for its model runner (V1 or
    V2), kept on the runner; returns which runner it is."""
    from recorder import recorder_for, runner_version  # beside this file
    from scoring import ScoringHook  # the statistics computed where the logits are

    runner = worker.model_runner
    recorder, scoring = recorder_for(runner), ScoringHook()
    recorder.install(worker)
    scoring.install(worker, recorder.extra_args)
    runner.mtp_harness_hooks = (recorder, scoring)
    return runner_version(runner)


def set_forcing(worker, forcing: bool) -> None:  # noqa: ANN001
    """On one worker: whether a request of the next batch forces a draft (StepRecorder.forcing)."""
    worker.model_runner.mtp_harness_hooks[0].forcing = forcing


def take_steps(worker, tokens: dict) -> dict:  # noqa: ANN001
    """On one worker: each request's recorded passes, cut to its committed tokens (request key -> steps)."""
    recorder = worker.model_runner.mtp_harness_hooks[0]
    return {key: recorder.take_steps(key, committed) for key, committed in tokens.items()}


def take_scores(worker, keys: list, theirs: list) -> tuple:  # noqa: ANN001
    """On one worker: each scoring request's results, checked against vLLM's own prompt log-probabilities, and the
    largest difference seen."""
    scoring = worker.model_runner.mtp_harness_hooks[1]
    if getattr(worker, "rank", 0) != 0:  # another rank of a parallel engine: it holds no logits to score with
        for key in keys:
            scoring.results.pop(key, None)
        return [], 0.0
    return [scoring.take(key, own) for key, own in zip(keys, theirs, strict=True)], scoring.largest_mismatch


class SchedulerWatch:
    """Counts what vLLM's scheduler did, read from its own state after each `schedule()` (observation only)."""

    def __init__(self, scheduler) -> None:  # noqa: ANN001 - vLLM's Scheduler
        self.counters: collections.Counter = collections.Counter()
        self.chunk_ends: dict[str, list[int]] = {}  # harness request key -> prompt tokens computed after each chunk
        # harness request key -> [pass start, drafts kept] where the scheduler cut a pass's drafts to its token budget
        self.budget_cuts: dict[str, list[list[int]]] = {}
        schedule = scheduler.schedule

        def watched_schedule(*args, **kwargs):
            proposed = {
                request.request_id: len(request.spec_token_ids)
                for request in scheduler.running
                if request.spec_token_ids
            }
            output = schedule(*args, **kwargs)
            self.observe(scheduler, output)
            self.observe_budget_cuts(scheduler, output, proposed)
            return output

        scheduler.schedule = watched_schedule

    def observe(self, scheduler, output) -> None:  # noqa: ANN001 - vLLM's Scheduler and SchedulerOutput
        counters = self.counters
        counters["prefix_cache_hit_tokens"] += sum(new.num_computed_tokens for new in output.scheduled_new_reqs)
        counters["preemptions"] += len(output.preempted_req_ids or ())
        prefilling = decoding = 0
        for req_id, scheduled in output.num_scheduled_tokens.items():
            request = scheduler.requests[req_id]
            before = request.num_computed_tokens - scheduled  # the scheduler advanced it for this step
            if before < request.num_prompt_tokens:
                prefilling += 1
                if request.num_computed_tokens < request.num_prompt_tokens:  # the chunk ended inside the prompt
                    counters["partial_prefills"] += 1
                    extra = getattr(request.sampling_params, "extra_args", None) or {}
                    if HARNESS_KEY in extra:
                        self.chunk_ends.setdefault(extra[HARNESS_KEY]["key"], []).append(request.num_computed_tokens)
            else:
                decoding += 1
        counters["prefills_beside_decodes"] += int(prefilling > 0 and decoding > 0)
        counters["steps_with_requests_waiting"] += int(len(scheduler.waiting) > 0)

    def observe_budget_cuts(self, scheduler, output, proposed: dict) -> None:  # noqa: ANN001 - vLLM's
        """Passes whose drafts the scheduler cut because the step's token budget ran out (vLLM's scheduler.py:862-871:
        num_new_tokens = min(tokens with drafts, token budget, ...), the drafts trimmed to fit), not because of the
        context end (there the drafts are cut to max_model_len - computed - sampled per step, a limit of its own)."""
        for request_id, drafts in proposed.items():
            scheduled = output.num_scheduled_tokens.get(request_id)
            request = scheduler.requests.get(request_id)
            if scheduled is None or request is None:
                continue
            kept = len(output.scheduled_spec_decode_tokens.get(request_id, ()))
            computed_before = request.num_computed_tokens - scheduled  # the scheduler advanced it for this step
            context_room = scheduler.max_model_len - computed_before - scheduler.num_sampled_tokens_per_step
            extra = getattr(request.sampling_params, "extra_args", None) or {}
            if kept < drafts and scheduled < context_room and HARNESS_KEY in extra:
                # the pass emits from the next output position on: the output tokens so far
                self.budget_cuts.setdefault(extra[HARNESS_KEY]["key"], []).append([request.num_output_tokens, kept])

    def take(self) -> dict:
        taken, self.counters = dict(self.counters), collections.Counter()
        return taken


if __name__ == "__main__":
    main()
