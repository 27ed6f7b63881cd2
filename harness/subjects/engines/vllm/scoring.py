"""Statistics computed where the logits are: inside vLLM's process, for `--reference engine` on checkpoints the
harness cannot hold (a vocabulary of 129k: V floats per position never cross the wire).

This file runs in vLLM's own environment (imported by harness/subjects/engines/vllm/server.py). A scoring request is
an ordinary vLLM request for prompt = the sequence to score, max_tokens 1 and prompt log-probabilities on, marked in
its extra_args. vLLM computes its prompt log-probabilities in the model runner's `_get_prompt_logprobs_dict` from
the hidden states of each prompt chunk; `ScoringHook` wraps that method and, before vLLM's own code runs, computes
the full-vocabulary logits of a marked request's chunk the same way (the same slice of the hidden states, the same
`compute_logits`), then hands them to the harness's own kernels: the law the decoders sample (temperature, top-k,
top-p: harness/decoding/sampling.py process_logits) and the per-token terms of the whole-sequence statistics
(harness/stats/kernels.py). vLLM's own prompt log-probabilities of the chunk are returned as before, and the server
checks that they equal log-softmax of the logits the hook computed (`consistency`), so a hook reading the wrong rows
fails loudly. Nothing here changes what vLLM computes for any request.

Returned per scored sequence and continuation position t (the token at sequence index prompt_length + t):
    before_t = P(tokens ranked before x_t), p_t = p(x_t)      (the probability-ordered PIT's parts)
    centred_t = log p(x_t) - mu_t, variance_t = s2_t          (the log-likelihood test's terms)
and per position the cumulant table [G, 3] summed over the call's sequences (the saddlepoint p-value's terms), so
what crosses the wire is O(sequences x length), whatever the vocabulary. For a law: the processed conditional after
the sequence, its tokens of probability >= threshold and the mass of the rest.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path

HARNESS_SCORE = "mtp_harness_score"  # extra_args key of a scoring request
HARNESS_PACKAGE = Path(__file__).resolve().parents[3]  # harness/ (engines/vllm/ -> engines -> subjects -> harness)


def harness_module(name: str):  # noqa: ANN201 - a module
    """Import a module of the harness (`harness.stats.kernels`) from the harness's own directory only: the harness
    package is registered from its folder, so nothing else of the harness's environment enters vLLM's. The modules
    imported this way need torch and the standard library, both in vLLM's environment."""
    if "harness" not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            "harness", HARNESS_PACKAGE / "__init__.py", submodule_search_locations=[str(HARNESS_PACKAGE)]
        )
        package = importlib.util.module_from_spec(spec)
        sys.modules["harness"] = package
        spec.loader.exec_module(package)
    return importlib.import_module(name)


class ScoringHook:
    """Wraps the model runner's prompt log-probabilities to score marked requests from their full logits."""

    def __init__(self) -> None:
        self.results: dict[str, dict] = {}  # request key -> what was computed (per chunk, merged)
        self.largest_mismatch = 0.0  # |vLLM's prompt logprob - log-softmax of the hook's logits|, over every row

    def install(self, worker, extra_args) -> None:  # noqa: ANN001 - vLLM's worker (wrapper); req_id -> extra_args
        import torch

        modules = (
            torch,
            harness_module("harness.contract.decoder"),
            harness_module("harness.decoding.sampling"),
            harness_module("harness.stats.kernels"),
        )
        runner = worker.model_runner
        if hasattr(runner, "prompt_logprobs_worker"):  # Model Runner V2
            self.install_on_runner_v2(runner, extra_args, modules)
            return
        original = runner._get_prompt_logprobs_dict

        def scored_prompt_logprobs(hidden_states, num_scheduled_tokens):  # noqa: ANN001
            chunks = []
            for req_id in list(runner.num_prompt_logprobs):
                asked = extra_args(req_id).get(HARNESS_SCORE)
                num_tokens = num_scheduled_tokens.get(req_id)
                if asked is None or num_tokens is None:
                    continue
                # the rows vLLM's own code below takes for this request's chunk (gpu_model_runner.py)
                request = runner.requests[req_id]
                start = request.num_computed_tokens
                count = min(num_tokens, len(request.prompt_token_ids) - (start + 1))
                if count <= 0:
                    continue
                offset = int(runner.query_start_loc.np[runner.input_batch.req_id_to_index[req_id]])
                with torch.no_grad():
                    logits = runner.model.compute_logits(hidden_states[offset : offset + count])
                if logits is not None:  # under tensor parallelism only the rank that gathers the logits has them
                    chunks.append((asked, start, logits.double()))
            output = original(hidden_states, num_scheduled_tokens)
            for asked, start, logits in chunks:
                self.score(asked, start, logits, *modules)
            return output

        runner._get_prompt_logprobs_dict = scored_prompt_logprobs

    def install_on_runner_v2(self, runner, extra_args, modules) -> None:  # noqa: ANN001
        """Model Runner V2 computes prompt log-probabilities in its prompt_logprobs_worker, from the whole step's
        hidden states (vllm/v1/worker/gpu/sample/prompt_logprob.py compute_prompt_logprobs)."""
        torch = modules[0]
        worker = runner.prompt_logprobs_worker
        original = worker.compute_prompt_logprobs

        def scored(logits_fn, hidden_states, input_batch, all_token_ids, num_computed_tokens, prompt_lens):  # noqa: ANN001
            chunks = []
            for i, req_id in enumerate(input_batch.req_ids):
                asked = extra_args(req_id).get(HARNESS_SCORE)
                if asked is None:
                    continue
                # the rows V2's own code takes for this request's chunk
                start = int(input_batch.num_computed_prefill_tokens_np[i])
                prompt_length = int(prompt_lens[int(input_batch.idx_mapping_np[i])])
                count = min(int(input_batch.num_scheduled_tokens[i]), prompt_length - (start + 1))
                if count <= 0:
                    continue
                offset = int(input_batch.query_start_loc_np[i])
                with torch.no_grad():
                    logits = logits_fn(hidden_states[offset : offset + count])
                if logits is not None:
                    chunks.append((asked, start, logits.double()))
            output = original(logits_fn, hidden_states, input_batch, all_token_ids, num_computed_tokens, prompt_lens)
            for asked, start, logits in chunks:
                self.score(asked, start, logits, *modules)
            return output

        worker.compute_prompt_logprobs = scored

    def score(self, asked: dict, start: int, logits, torch, contract, sampling, kernels) -> None:  # noqa: ANN001
        """One chunk of a scoring request: rows start.. of its logits (row r predicts token r + 1 of the sequence)."""
        sequence = asked["sequence"]
        rows = range(start, start + logits.shape[0])
        config = contract.SamplingConfig(*asked["sampling"])
        result = self.results.setdefault(asked["key"], {})
        targets = torch.tensor([sequence[r + 1] for r in rows], dtype=torch.long)
        logprobs = torch.log_softmax(logits, dim=-1)
        result.setdefault("own", []).extend(logprobs.gather(-1, targets[:, None]).squeeze(-1).tolist())
        if asked["what"] == "law":
            last = len(sequence) - 2  # the row after the scored prefix (the sequence ends with a stand-in token)
            if last in rows:
                probs = sampling.process_logits(logits[last - start], config)
                kept = (probs >= asked["threshold"]).nonzero().squeeze(-1).tolist()
                result["law"] = {str(t): float(probs[t]) for t in kept}
                result["rest"] = float(probs.sum() - probs[kept].sum())
            return
        first = asked["prompt_length"] - 1  # the row that predicts the first continuation token
        wanted = [i for i, r in enumerate(rows) if r >= first]
        if not wanted:
            return
        probs = sampling.process_logits(logits[wanted], config)
        tokens = targets[wanted]
        before, p_of_token = kernels.pit_parts(probs, tokens)
        centred, variance = kernels.log_likelihood_terms(probs, tokens)
        tables = kernels.cumulants(probs)  # [rows, G, 3]
        positions = [rows[i] - first for i in wanted]
        terms = result.setdefault("terms", {})
        for j, t in enumerate(positions):
            terms[t] = (float(before[j]), float(p_of_token[j]), float(centred[j]), float(variance[j]))
        result.setdefault("tables", {}).update({t: tables[j] for j, t in enumerate(positions)})

    def take(self, key: str, theirs: list[float]) -> dict:
        """What was computed for a request, checked against vLLM's own prompt log-probabilities of its tokens
        (positions 1..)."""
        result = self.results.pop(key, {})
        own = result.pop("own", [])
        if len(theirs) != len(own):
            raise RuntimeError(f"scoring {key}: the hook saw {len(own)} rows, vLLM scored {len(theirs)}")
        for mine, entry in zip(own, theirs, strict=True):
            self.largest_mismatch = max(self.largest_mismatch, abs(mine - entry))
        return result
