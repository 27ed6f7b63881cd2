"""`mtp-harness bench`: the harness's speed. `decoder`: the batched MTP decoder against transformers' MTP loop
(bench_decoder.py); `run` and `mutants`: a job run as a user runs it, timed against its goal (bench_jobs.py); `vllm`:
the harness's overhead on vLLM against vLLM's own generate (bench_overhead.py); `runners` and `v2-sampling`: vLLM's
Model Runner V2 against V1, and V2's sampling suite (bench_runners.py)."""

from __future__ import annotations

import argparse
import json

from harness.contract.paths import DEFAULT_MODEL

HELP = "the harness's speed: the batched MTP decoder vs transformers' MTP loop, or a job timed against its goal"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--job",
        action="append",
        choices=("decoder", "run", "mutants", "vllm", "runners", "v2-sampling"),
        help="decoder (default): samples/s of the MTP decoder vs transformers; run: `mtp-harness run` with no options, "
        "timed against 3 minutes, with its time left at 25/50/75%% against the time actually left; mutants: the "
        "catalogue at the ci budget, timed against 15 minutes; vllm: the vllm-mtp subject's decode against vLLM's "
        "own LLM.generate, 100 requests x 32 tokens on tiny-mimo at k=2, against 1.2x; runners: vLLM's greedy "
        "cases at k=2 on Model Runner V1 and V2, summed case seconds V2/V1 against 3x; v2-sampling: the sampling suite "
        "on V2 at the smoke budget against 10 minutes (repeat --job for several)",
    )
    parser.add_argument(
        "--repeats", type=int, default=5, help="vllm job: measured decodes on each path, medians (default 5)"
    )
    parser.add_argument("--model", default=str(DEFAULT_MODEL), help="model directory or fixture name")
    parser.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    parser.add_argument(
        "--dtype",
        nargs="+",
        default=None,
        help="one or more dtypes, each measured in the same run (default: float32 and float64 on CPU, bf16 on CUDA)",
    )
    parser.add_argument("--requests", type=int, default=4096, help="requests decoded as one batch (default 4096)")
    parser.add_argument("--new-tokens", type=int, default=8, help="tokens per request (default 8)")
    parser.add_argument("-k", type=int, default=2, help="draft tokens per pass (default 2)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    parser.add_argument(
        "--transformers-requests", type=int, default=64, help="requests for the transformers loop (default 64)"
    )
    parser.add_argument("--json", action="store_true", help="print the result as JSON")


def main(args: argparse.Namespace) -> int:
    jobs = args.job or ["decoder"]
    timed = [job for job in jobs if job in ("run", "mutants")]
    failed = bench_jobs(timed, args.json) if timed else 0
    if "vllm" in jobs:
        failed = bench_vllm(args.repeats, args.json) or failed
    if "runners" in jobs or "v2-sampling" in jobs:
        failed = bench_runners(jobs, args.json) or failed
    if "decoder" in jobs:
        failed = bench_decoder(args) or failed
    return failed


def bench_vllm(repeats: int, as_json: bool) -> int:
    """The harness's overhead on vLLM (harness/commands/bench_overhead.py)."""
    from harness.commands.bench_overhead import measure_overhead

    result = measure_overhead("vllm-mtp", repeats=repeats)
    print(json.dumps(result.to_dict(), indent=2) if as_json else result.summary())
    return 0


def bench_runners(jobs: list[str], as_json: bool) -> int:
    """vLLM's Model Runner V2 against V1, and V2's sampling suite (harness/commands/bench_runners.py); 1 when a run
    failed."""
    from harness.commands.bench_runners import compare_runners, time_v2_sampling, v2_sampling_summary

    failed = 0
    if "runners" in jobs:
        comparison = compare_runners()
        print(json.dumps(comparison.to_dict(), indent=2) if as_json else comparison.summary())
        failed = int(bool(comparison.v1.exit_code or comparison.v2.exit_code))
    if "v2-sampling" in jobs:
        sampling = time_v2_sampling()
        shown = {key: value for key, value in sampling.items() if key != "case_seconds"}
        print(json.dumps(shown, indent=2) if as_json else v2_sampling_summary(sampling))
        failed = failed or int(bool(sampling["exit_code"]))
    return failed


def bench_jobs(jobs: list[str], as_json: bool) -> int:
    """Each job run as a user runs it, timed against its goal (harness/commands/bench_jobs.py); 1 when a job failed."""
    from harness.commands.bench_jobs import job_summary, time_job

    results = [time_job(job) for job in jobs]
    if as_json:
        print(json.dumps([result.to_dict() for result in results], indent=2))
    else:
        print("\n".join(job_summary(result) for result in results))
    return 1 if any(result.exit_code for result in results) else 0


def bench_decoder(args: argparse.Namespace) -> int:
    from harness.commands.bench_decoder import run_bench
    from harness.models.allocator import keep_freed_memory

    keep_freed_memory()  # as in a run's workers (harness/models/allocator.py)
    from harness.contract.paths import resolve_model_path
    from harness.models.loading import load_bundle
    from harness.models.prompts import load_prompts

    dtypes = args.dtype or (["bf16"] if args.device.startswith("cuda") else ["float32", "float64"])
    results = []
    for dtype in dtypes:
        bundle = load_bundle(resolve_model_path(args.model), device=args.device, dtype=dtype)
        prompt = load_prompts()[0].encode(bundle.tokenizer)
        results.append(
            run_bench(
                bundle, prompt, args.requests, args.new_tokens, args.k, args.temperature, args.transformers_requests
            )
        )
    if args.json:
        print(json.dumps([r.to_dict() for r in results], indent=2))
        return 0
    first = results[0]
    print(
        f"model {first.model}, prompt {first.prompt_tokens} tokens, {first.new_tokens} new tokens, k={first.k}, "
        f"temperature {first.temperature}, {first.torch_threads} torch threads, {args.device}"
    )
    print(
        f"{'dtype':<9}{'MTPDecoder samples/s':>22}{'transformers samples/s':>24}{'speed-up':>10}"
        f"{'tokens/pass':>13}{'accepted/pass':>15}{'heads/verify':>14}"
    )
    for result in results:
        print(
            f"{result.dtype:<9}{result.mtp_samples_per_second:>22.1f}{result.transformers_samples_per_second:>24.1f}"
            f"{result.speedup:>9.1f}x{result.tokens_per_pass:>13.3f}{result.accepted_drafts_per_pass:>15.3f}"
            f"{result.head_cost_vs_verify_pass:>14.3f}"
        )
    print(
        f"(MTPDecoder: {first.mtp_requests} requests as one batch; transformers: {first.transformers_requests} "
        "requests one at a time; heads/verify: k drafts vs one (k+1)-token verify pass)"
    )
    return 0
