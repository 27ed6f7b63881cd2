"""A greedy failure group's reproducer for a vLLM subject, with vLLM alone: no harness import, so it can go
straight into a vLLM bug report. It decodes the group's minimal request with vLLM's MTP speculative decoding
(the engine configuration the run used) and, in a child process, with vLLM without speculation (vLLM's own
target-only greedy), prints both with each verification pass, and exits 1 when they differ.

vLLM has no API to force a draft; where the minimal case forces drafts, the script wraps the MTP proposer's
per-position draft sampler exactly as the harness's engine server does (harness/subjects/engines/vllm/server.py),
and says so. Every value is a Python literal of numbers or repr()-quoted strings: nothing from the run is
executed as code."""

from __future__ import annotations

from typing import Any

from harness.subjects.engines.vllm.server import llm_arguments
from harness.triage.reproducer import case_fields

TEMPLATE = '''"""mtp-harness reproducer, vLLM alone: run {run_id}, failure group {group} ({count} cases; cause: CAUSE).
Minimal case (batch of one): k = {k}, {forced_count} forced draft(s), {new_tokens} new tokens, {prompt_tokens}
prompt tokens, greedy. Run it with the Python of an environment with vLLM {engine_version}:

    python {filename}

It decodes the request with vLLM's MTP speculative decoding and, in a child process, with vLLM without
speculation, prints both outputs and each verification pass, and exits with status 1 when they differ
(greedy speculative decoding must reproduce target-only greedy token for token).{forcing_note}"""

import json
import os
import subprocess
import sys

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")  # the engine core in this process (the hooks)
os.environ.setdefault("VLLM_CPU_OMP_THREADS_BIND", "nobind")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")  # vLLM logs to stdout; set INFO to see them

from vllm import LLM, SamplingParams  # noqa: E402

CAUSE = {signature!r}
LLM_ARGUMENTS = {llm_arguments!r}
SPECULATIVE_CONFIG = {speculative!r}
PROMPT_IDS = {prompt_ids!r}
SAMPLING = dict(temperature=0.0, max_tokens={new_tokens!r}, ignore_eos=True, stop_token_ids={eos!r}, detokenize=False)
FORCED_DRAFTS = {forced!r}  # output position -> the draft token vLLM's MTP proposer must propose there
HARNESS_EXPECTED = {expected!r}  # the harness's target-only greedy reference (its own decoder, same weights)
TARGET_ONLY = "--target-only"


class Passes:
    """Each verification pass of the request: the drafts sent to verification and the tokens vLLM's rejection
    sampler returned (recorded at the model runner's _sample); forced drafts put into the proposer's output."""

    def __init__(self):
        self.passes, self.committed, self.draft_index = [], 0, 0

    def install(self, worker):
        runner = worker.model_runner
        execute_model, sample = runner.execute_model, runner._sample
        scheduled = {{}}

        def recorded_execute_model(scheduler_output, *args, **kwargs):
            scheduled["drafts"] = scheduler_output.scheduled_spec_decode_tokens
            return execute_model(scheduler_output, *args, **kwargs)

        def recorded_sample(logits, spec_decode_metadata):
            output = sample(logits, spec_decode_metadata)
            for row, req_id in enumerate(runner.input_batch.req_ids):
                drafts = [int(t) for t in scheduled["drafts"].get(req_id, []) if t >= 0]
                verified = [int(t) for t in output.sampled_token_ids[row, : len(drafts) + 1].tolist() if t >= 0]
                if verified:
                    self.passes.append((drafts, verified))
                    self.committed += len(verified)
            return output

        runner.execute_model, runner._sample = recorded_execute_model, recorded_sample
        drafter = getattr(runner, "drafter", None)
        if drafter is None or not FORCED_DRAFTS:
            return
        propose, sample_drafts = drafter.propose, drafter._sample_draft_tokens

        def counted_propose(*args, **kwargs):
            self.draft_index = 0
            return propose(*args, **kwargs)

        def forced_sample_drafts(hidden_states, sampling_metadata):
            tokens, probs = sample_drafts(hidden_states, sampling_metadata)
            forced = FORCED_DRAFTS.get(self.committed + self.draft_index)  # the output position of this draft
            if forced is not None:
                tokens[0] = forced
                if probs is not None:
                    probs[0].zero_()
                    probs[0, forced] = 1.0
            self.draft_index += 1
            return tokens, probs

        drafter.propose, drafter._sample_draft_tokens = counted_propose, forced_sample_drafts


def decode(speculative_config):
    llm = LLM(**LLM_ARGUMENTS, speculative_config=speculative_config)
    passes = Passes()
    llm.collective_rpc(passes.install)
    [output] = llm.generate([{{"prompt_token_ids": list(PROMPT_IDS)}}], SamplingParams(**SAMPLING), use_tqdm=False)
    return [int(t) for t in output.outputs[0].token_ids], passes.passes


def target_only():
    """vLLM without speculation, in a child process (one LLM per process)."""
    done = subprocess.run([sys.executable, __file__, TARGET_ONLY], capture_output=True, text=True, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith(TARGET_ONLY)]
    if done.returncode or not lines:
        sys.exit(f"vLLM without speculation failed (exit status {{done.returncode}}):\\n{{done.stderr[-3000:]}}")
    return json.loads(lines[-1].removeprefix(TARGET_ONLY))


def main():
    if TARGET_ONLY in sys.argv:
        print(TARGET_ONLY + json.dumps(decode(None)[0]))
        return 0
    expected = target_only()
    actual, passes = decode(SPECULATIVE_CONFIG)
    print(f"vLLM without speculation  {{expected}}")
    print(f"vLLM MTP (k = {k})         {{actual}}")
    start = 0
    for drafts, verified in passes:
        print(f"  pass at {{start}}: drafts {{drafts}}, vLLM verified {{verified}}")
        start += len(verified)
    if list(HARNESS_EXPECTED) != expected:
        print(f"note: the harness's own target-only greedy was {{list(HARNESS_EXPECTED)}}")
    index = next((i for i, (a, b) in enumerate(zip(expected, actual)) if a != b), None)
    if index is None and len(expected) == len(actual):
        print("same tokens: the case passes on this vLLM")
        print("not reproduced")
        return 0
    index = min(len(expected), len(actual)) if index is None else index
    print(f"first divergence at generated index {{index}}: greedy speculative decoding changed the output")
    print("BUG REPRODUCED")
    return 1


if __name__ == "__main__":
    sys.exit(main())
'''

FORCING_NOTE = """

vLLM has no API to force a draft: FORCED_DRAFTS are put in by wrapping the MTP proposer's draft sampler
(`_sample_draft_tokens`, once per draft position), the only change made to vLLM."""


def vllm_reproducer_script(group: dict[str, Any], run: dict[str, Any], filename: str) -> str:
    """The vLLM-alone script for a greedy `group` (with a reproduced minimal case that carries the engine
    configuration the run's vLLM decoder used)."""
    fields = case_fields(group, run, filename)
    arguments = llm_arguments(group["minimal"]["server_config"])
    speculative = arguments.pop("speculative_config")
    return TEMPLATE.format(
        engine_version=str(run.get("engine", "")).split(" (")[0].removeprefix("vllm ") or "(the run's)",
        forced_count=len(fields["forced"]),
        forcing_note=FORCING_NOTE if fields["forced"] else "",
        llm_arguments=arguments,
        speculative=speculative,
        **fields,
    )
