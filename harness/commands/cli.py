"""`mtp-harness` command line: `run` runs the suites through pytest and prints a one-screen summary."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from harness.commands import mutants as mutants_command
from harness.contract.budget import BUDGET_HELP, BUDGETS, DEFAULT_BUDGET
from harness.contract.errors import HarnessError
from harness.contract.invocation import suites_pytest, wait_through_ctrl_c
from harness.contract.paths import DEFAULT_MODEL, REPORTS, SUITES_DIR
from harness.contract.run_options import (
    DEFAULT_CONFIGURATION,
    NO_FIXES,
    EngineOptions,
    Reference,
    RunOptions,
    pytest_arguments,
)
from harness.contract.suites import ALL, SUITE_NAMES, marker_expression, parse_suites

if TYPE_CHECKING:
    from harness.subjects.engines.engine import Engine

MUTANTS = "mutants"  # --suite mutants: the mutation catalogue (harness/commands/mutants.py)


WORKERS_HELP = (
    "pytest-xdist workers: a number, 0 for one process, or auto for one per usable core; default: one per "
    "usable core on a CPU device, one process on an accelerator (each worker loads its own copy of the model)"
)


def suites_option(value: str) -> str:
    """--suite: a suite (harness/contract/suites.py), several joined by commas, `all`, or `mutants` alone."""
    if value.strip() == MUTANTS:
        return MUTANTS
    try:
        return ",".join(parse_suites(value))
    except HarnessError as error:
        raise argparse.ArgumentTypeError(f"{error}; or {MUTANTS} (the mutation catalogue) alone") from None


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS has one), at least 1."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def workers_option(value: str) -> int | str:
    """-n: a count of workers (0: no pytest-xdist) or 'auto'."""
    if value == "auto":
        return value
    try:
        count = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of workers or 'auto', got {value!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more workers, got {count}")
    return count


def resolve_workers(requested: int | str | None, device: str) -> int:
    """The pytest-xdist workers of a run; 0 runs the suites in one process (also where xdist is missing)."""
    if requested is None:
        requested = "auto" if device.split(":")[0] == "cpu" else 0
    workers = usable_cores() if requested == "auto" else int(requested)
    if workers == 1 and requested == "auto":
        return 0  # one core: a single worker only adds a process
    if workers and importlib.util.find_spec("xdist") is None:
        print("mtp-harness run: pytest-xdist is not installed; running in one process", flush=True)
        return 0
    return workers


USAGE_ERROR = 2  # the exit status of a command line that cannot work (argparse uses it too)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mtp-harness", description="Correctness harness for MTP-assisted decoding.")
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run",
        help="run the suites on a decoder and model, print a summary",
        description="Run the suites through pytest, one pytest-xdist worker per usable core by default. Progress: "
        "a line every 5% of the cases (or each minute) with cases done, total and the time left; then a "
        "summary per suite and the path of the HTML report.",
    )
    run.add_argument(
        "--suite",
        type=suites_option,
        default=ALL,
        metavar="{" + ",".join([*SUITE_NAMES, ALL, MUTANTS]) + "}",
        help=f"which suites, one or several joined by commas (default: {ALL} = {', '.join(SUITE_NAMES)}; "
        f"{MUTANTS}: the mutation catalogue)",
    )
    run.add_argument("--decoder", default="mtp", help="decoder under test (default: mtp)")
    run.add_argument("--model", default=str(DEFAULT_MODEL), help="model directory or fixture name")
    run.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    run.add_argument("--dtype", default=None, help="float64 | float32 | bf16 | fp16 (default: float64 on CPU)")
    run.add_argument(
        "--harness-seed", default=None, help="session seed: an integer, 'random' or 'last' (default: the fixed seed)"
    )
    run.add_argument(
        "--engine-fixes",
        default=NO_FIXES,
        metavar="none|all|SLUG[,SLUG...]",
        help="an engine subject with the documented fix of the named findings applied inside its process (beneath "
        "the known bugs); default none: the engine as shipped",
    )
    run.add_argument(
        "--engine-config",
        default=DEFAULT_CONFIGURATION,
        metavar="NAME",
        help="an engine subject under a deployed configuration (vLLM: prefix-cache, chunked-prefill, preempt, queue, "
        "async; llama.cpp: prefix-cache, chunked-prefill, queue, context-shift); default: the harness's own engine "
        "settings",
    )
    run.add_argument(
        "--engine-arg",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="one of an engine subject's own arguments, passed through as data (repeat it), e.g. quantization=fp8",
    )
    run.add_argument(
        "--engine-runner",
        default=None,
        metavar="NAME",
        help="an engine subject's runner: vLLM's model runner (v1, v2), llama.cpp's build (source: built from its "
        "source with the harness's instrumentation; wheel: the published wheel); default: the one the engine picks on "
        "the device (vLLM: v1 on CPU, v2 on CUDA; llama.cpp: source)",
    )
    run.add_argument(
        "--engine-patch",
        action="append",
        default=[],
        metavar="FILE",
        help="a change of your own to the source of an engine built from it (llama.cpp: a diff relative to its tree, "
        "as git diff writes it), applied after the harness's instrumentation (repeat it); the build is made first "
        "when missing",
    )
    run.add_argument(
        "--engine-version",
        default=None,
        metavar="RELEASE",
        help="an engine subject at another release than the pinned one, as shipped, from its own environment "
        "(mtp-harness engine install NAME --version RELEASE); the findings watch only the releases they were "
        "measured on, so anything another release fails is a failure",
    )
    run.add_argument(
        "--reference",
        choices=[str(r) for r in Reference],
        default=str(Reference.HARNESS),
        help="the target-only truth: harness (default: the harness's own copy of the checkpoint) or engine (the "
        "engine under test without speculation and its log-probabilities; this process then reads no weight file)",
    )
    run.add_argument("--budget", choices=sorted(BUDGETS), default=DEFAULT_BUDGET, help=BUDGET_HELP)
    run.add_argument("-n", "--workers", type=workers_option, default=None, help=WORKERS_HELP)
    run.add_argument("--report-dir", type=Path, default=REPORTS, help="where run directories go (default: ./reports)")
    run.add_argument("pytest_args", nargs=argparse.REMAINDER, help="extra pytest arguments after --")
    mutants = commands.add_parser(
        "mutants", help="the mutation catalogue: every suite against every mutant and the correct decoder"
    )
    mutants_command.add_arguments(mutants)
    nightly = commands.add_parser(
        "nightly", help="the nightly job: every suite and the mutation catalogue at a budget, one report"
    )
    nightly.add_argument("--budget", choices=sorted(BUDGETS), default="full", help=BUDGET_HELP + " (default full)")
    nightly.add_argument("--decoder", default="mtp", help="decoder under test (default: mtp)")
    nightly.add_argument("--model", default=str(DEFAULT_MODEL), help="model directory or fixture name")
    nightly.add_argument("--device", default=None, help="torch device (default: cuda when available, else cpu)")
    nightly.add_argument("--dtype", default=None, help="model dtype (default: bf16 on CUDA, float32 on CPU)")
    nightly.add_argument("-n", "--workers", type=int, default=2, help="pytest-xdist workers / parallel mutants")
    nightly.add_argument("--report-dir", type=Path, default=REPORTS, help="where run directories go")
    engine = commands.add_parser(
        "engine",
        help="the environments of out-of-process engines: install one at any release, list, remove, or show one",
    )
    engine.add_argument(
        "action",
        choices=["install", "status", "list", "remove"],
        help="install (idempotent), status, list (every installed environment) or remove (one, with --version)",
    )
    engine.add_argument(
        "name", nargs="?", help="engine name (harness/subjects/engines/registry.py: vllm, llama.cpp); not for list"
    )
    engine.add_argument(
        "--version",
        default=None,
        help="the engine's release (e.g. 0.31.0 for vLLM, 2026.9.11063 for llama.cpp's xllamacpp), each in an "
        "environment of its own beside the others; default: the pinned one",
    )
    engine.add_argument(
        "--build",
        action="store_true",
        help="llama.cpp: build it from the pinned sdist's source with the harness's instrumentation compiled in (the "
        "default llama.cpp subject), plus each --patch; cached by the hash of its patches",
    )
    engine.add_argument(
        "--patch",
        action="append",
        default=[],
        metavar="FILE",
        help="with --build: a change of your own to llama.cpp's source (a diff relative to its tree, as git diff "
        "writes it), applied after the instrumentation (repeat it); run it with mtp-harness run --engine-patch FILE",
    )
    engine.add_argument(
        "--fixes",
        default=NO_FIXES,
        metavar="none|all|SLUG[,SLUG...]",
        help="with --build: the documented fixes of these findings built in (what mtp-harness run --engine-fixes runs)",
    )
    engine.add_argument(
        "--flavour",
        choices=["cpu", "cuda"],
        default=None,
        help="default: the engine's only flavour (llama.cpp: cpu), else cuda when this machine has a CUDA GPU",
    )
    matrix = commands.add_parser(
        "matrix",
        help="which engine releases are safe with MTP: the suites and every finding's reproducer on each release",
        description="Install each release of the engine where missing, run every finding's reproducer and the suites "
        "on it as shipped, and write versions.json and its page in reports/matrix-<time>/.",
    )
    from harness.commands.matrix import add_arguments as add_matrix_arguments

    add_matrix_arguments(matrix)
    summarize = commands.add_parser(
        "summarize",
        help="markdown tables of runs' results (counts per suite, the mutation and efficiency tables), headed by "
        "each run's date, commit and command: what docs/measurements/ pastes",
    )
    summarize.add_argument(
        "runs",
        nargs="+",
        type=Path,
        help="run directories (reports/<run-id>), results.json files, or --report-dirs (their latest run)",
    )
    summarize.add_argument(
        "--json",
        action="store_true",
        help="print what each run judged per suite as JSON (verdict, judged, passed, failed, expected failures by "
        "finding, not judged by reason, the command beneath a masking finding's fix) instead of the markdown",
    )
    bench = commands.add_parser(
        "bench",
        help="the harness's speed: the batched MTP decoder vs transformers' MTP loop, or a job timed against its goal",
    )
    bench.add_argument(
        "--job",
        action="append",
        choices=("decoder", "run", "mutants", "vllm"),
        help="decoder (default): samples/s of the MTP decoder vs transformers; run: `mtp-harness run` with no options, "
        "timed against 3 minutes, with its time left at 25/50/75%% against the time actually left; mutants: the "
        "catalogue at the ci budget, timed against 15 minutes; vllm: the vllm-mtp subject's decode against vLLM's "
        "own LLM.generate, 100 requests x 32 tokens on tiny-mimo at k=2, against 1.2x (repeat --job for several)",
    )
    bench.add_argument(
        "--repeats", type=int, default=5, help="vllm job: measured decodes on each path, medians (default 5)"
    )
    bench.add_argument("--model", default=str(DEFAULT_MODEL), help="model directory or fixture name")
    bench.add_argument("--device", default="cpu", help="torch device (default: cpu)")
    bench.add_argument(
        "--dtype",
        nargs="+",
        default=None,
        help="one or more dtypes, each measured in the same run (default: float32 and float64 on CPU, bf16 on CUDA)",
    )
    bench.add_argument("--requests", type=int, default=4096, help="requests decoded as one batch (default 4096)")
    bench.add_argument("--new-tokens", type=int, default=8, help="tokens per request (default 8)")
    bench.add_argument("-k", type=int, default=2, help="draft tokens per pass (default 2)")
    bench.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    bench.add_argument(
        "--transformers-requests", type=int, default=64, help="requests for the transformers loop (default 64)"
    )
    bench.add_argument("--json", action="store_true", help="print the result as JSON")
    return parser


def pytest_command(args: argparse.Namespace, options: RunOptions, junit: Path) -> list[str]:
    """The pytest invocation for `mtp-harness run` (printed, so a run can be reproduced by hand); the run's options
    written back by harness/contract/run_options.py; the report goes beside the JUnit file. Progress comes from
    harness.plugin.progress instead of a dot per test; the costliest cases go first (harness.plugin.case_order), in
    that order to the workers (--no-loadscope-reorder)."""
    command = [*suites_pytest([SUITES_DIR]), "-m", marker_expression(tuple(args.suite.split(","))), "-q"]
    command += ["-p", "harness.plugin.progress", "-p", "harness.plugin.case_order"]
    command += ["-o", "console_output_style=classic"]
    command.append(f"--harness-report={junit.parent}")
    command += pytest_arguments(options)
    workers = resolve_workers(args.workers, args.device)
    if workers:
        command += ["-n", str(workers), "--dist", "loadgroup", "--no-loadscope-reorder"]
    command.append(f"--junitxml={junit}")
    extra = args.pytest_args[1:] if args.pytest_args[:1] == ["--"] else args.pytest_args
    return command + extra


def not_judged_suites(results_json: Path) -> list[str]:
    """The suites of a run's results.json that judged none of their cases (harness/report/judgement.py)."""
    from harness.report.judgement import NOT_JUDGED, judge

    if not results_json.is_file():
        return []
    cases = json.loads(results_json.read_text())["cases"]
    return [j.suite for j in judge(cases) if j.verdict == NOT_JUDGED]


def run(args: argparse.Namespace) -> int:
    from harness.subjects.engines.registry import engine_of_decoder
    from harness.subjects.run_options import CLI, read_run_options

    try:  # bad input stops here, as one line, before pytest starts
        options = read_run_options(
            decoder=args.decoder,
            model=args.model,
            device=args.device,
            dtype=args.dtype,
            budget=args.budget,
            seed=args.harness_seed,
            reference=args.reference,
            engine_config=args.engine_config,
            engine_fixes=args.engine_fixes,
            engine_args=args.engine_arg,
            engine_runner=args.engine_runner,
            engine_patches=args.engine_patch,
            engine_version=args.engine_version,
            spelling=CLI,
        )
    except HarnessError as error:
        print(f"mtp-harness run: {error}", file=sys.stderr)
        return USAGE_ERROR
    engine = engine_of_decoder(options.decoder, options.engine.version)
    if engine is not None and engine.make_build is not None:  # built from source: made first when missing
        try:
            engine.make_build(options.engine, lambda line: print(f"mtp-harness run: {line}", flush=True))
        except HarnessError as error:
            print(f"mtp-harness run: {error}", file=sys.stderr)
            return 1
    if args.suite == MUTANTS:
        catalogue = mutants_command.parse(["--model", args.model, "--device", args.device, "--budget", args.budget])
        catalogue.workers = 2 if args.workers is None else usable_cores() if args.workers == "auto" else args.workers
        catalogue.workers = max(1, catalogue.workers)
        catalogue.dtype, catalogue.harness_seed, catalogue.report_dir = args.dtype, args.harness_seed, args.report_dir
        return mutants_command.run(catalogue)
    run_id = time.strftime("%Y%m%d-%H%M%S")
    run_dir = args.report_dir / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    junit = run_dir / "junit.xml"
    command = pytest_command(args, options, junit)
    print("mtp-harness run:", shlex.join(command), flush=True)
    started = time.perf_counter()
    code = wait_through_ctrl_c(subprocess.Popen(command))
    elapsed = time.perf_counter() - started
    print()
    if code == 5:
        print("mtp-harness: no test matched these suites")
    verdict = "PASSED" if code == 0 else "FAILED"
    unjudged = not_judged_suites(run_dir / "results.json")
    report = run_dir / "index.html"
    where = f"report {report}" if report.is_file() else f"results in {run_dir}"
    print(f"mtp-harness: {verdict} in {elapsed:.1f}s (pytest exit code {code}); {where}")
    if unjudged:  # silence is never success: a suite that judged nothing is named beside the verdict
        print(f"mtp-harness: NOT JUDGED: {', '.join(unjudged)} (none of its cases judged; the summary above says why)")
    return code


def bench(args: argparse.Namespace) -> int:
    jobs = args.job or ["decoder"]
    timed = [job for job in jobs if job in ("run", "mutants")]
    failed = bench_jobs(timed, args.json) if timed else 0
    if "vllm" in jobs:
        failed = bench_vllm(args.repeats, args.json) or failed
    if "decoder" in jobs:
        failed = bench_decoder(args) or failed
    return failed


def bench_vllm(repeats: int, as_json: bool) -> int:
    """The harness's overhead on vLLM (harness/commands/bench_overhead.py)."""
    from harness.commands.bench_overhead import measure_overhead

    result = measure_overhead("vllm-mtp", repeats=repeats)
    print(json.dumps(result.to_dict(), indent=2) if as_json else result.summary())
    return 0


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
    from harness.commands.bench import run_bench
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


def engine(args: argparse.Namespace) -> int:
    from harness.subjects.engines.environments import EngineEnvironmentError, default_flavour, install, remove
    from harness.subjects.engines.registry import engine_named

    if args.action == "list":
        return engine_list()
    try:
        if args.name is None:
            raise HarnessError(f"`engine {args.action}` needs an engine name (vllm, llama.cpp, transformers)")
        record = engine_named(args.name)
        environment = record.environment
        flavour = args.flavour or default_flavour(environment)
        environment.flavour(flavour, args.version)  # a version that is no release number stops here
        own = environment.flavour(flavour).version
        if record.pinned_in_process and args.action == "install" and args.version in (None, own):
            raise HarnessError(
                f"{record.name} {own} is the harness's own and runs in its process; "
                f"install another release with --version"
            )
    except HarnessError as error:
        print(f"mtp-harness engine: {error}", file=sys.stderr)
        return USAGE_ERROR
    if (args.patch or args.fixes != NO_FIXES) and not args.build:
        print("mtp-harness engine: --patch and --fixes go with --build", file=sys.stderr)
        return USAGE_ERROR
    if args.build and args.version is not None:
        print("mtp-harness engine: --build builds the pinned release's source, not --version", file=sys.stderr)
        return USAGE_ERROR
    try:
        if args.build:
            return engine_build(record, args)
        if args.action == "install":
            log = lambda line: print(f"mtp-harness engine: {line}", flush=True)  # noqa: E731
            install(environment, flavour, log=log, version=args.version)
            return 0
        if args.action == "remove":
            if args.version is None:
                raise EngineEnvironmentError("`engine remove` needs --version (what `engine list` shows)")
            print(f"mtp-harness engine: removed {remove(environment, flavour, args.version)}")
            return 0
        home = environment.home(environment.flavour(flavour, args.version))
        version = environment.installed_version(flavour, args.version)
        print(f"{environment.name} {flavour}: {version or 'not installed'} ({home})")
        return 0 if version else 1
    except EngineEnvironmentError as error:
        print(f"mtp-harness engine: {error}", file=sys.stderr)
        return 1


def engine_list() -> int:
    """`engine list`: every installed engine environment, its release, size and install time."""
    from harness.subjects.engines.environments import directory_size, engines_root, installed_environments

    found = installed_environments()
    if not found:
        print(f"no engine environment installed under {engines_root()}")
        return 0
    print(f"{'engine':10} {'flavour':7} {'version':15} {'from':26} {'size':>9} {'install':>7}  where")
    for info in found:
        size = info.get("size_bytes") or directory_size(Path(info["home"]))  # measured now for older installs
        seconds = f"{info['install_seconds']:.0f} s" if "install_seconds" in info else "?"
        origin = f"source, build {info['build']['key']}" if "build" in info else "its wheel"
        print(
            f"{info['engine']:10} {info['flavour']:7} {info['version']:15} {origin:26} {size / 2**30:>5.2f} GiB "
            f"{seconds:>7}  {info['home']}"
        )
    return 0


def engine_build(record: Engine, args: argparse.Namespace) -> int:
    """`engine install NAME --build [--patch FILE]...`: the engine built from its source (llama.cpp) unless that build
    exists; `engine status NAME --build`: whether it does."""
    if record.make_build is None or record.build_record is None:
        print(f"mtp-harness engine: {record.name} is installed from its wheel; it has no build from source")
        return USAGE_ERROR
    from harness.subjects.run_options import CLI, check_engine_fixes

    patches = tuple(str(Path(patch).resolve()) for patch in args.patch)
    try:
        fixes = check_engine_fixes(args.fixes, record.decoder_name(True), record, CLI)
    except HarnessError as error:
        print(f"mtp-harness engine: {str(error).replace('--engine-fixes', '--fixes')}", file=sys.stderr)
        return USAGE_ERROR
    options = EngineOptions(runner=record.source_runner, fixes=fixes, patches=patches)
    if args.action == "install":
        record.make_build(options, lambda line: print(f"mtp-harness engine: {line}", flush=True))
        return 0
    built = record.build_record(options)
    what = f"{record.name} from source with {len(fixes)} fix(es) and {len(patches)} patch(es) of yours"
    if built is None:
        asked = "".join([f" --fixes {args.fixes}" if fixes else "", *(f" --patch {p}" for p in patches)])
        print(f"{what}: not built (mtp-harness engine install {record.name} --build{asked})")
        return 1
    print(f"{what}: build {built['build']['key']}, built {built['built_at']} in {built['install_seconds']} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "run":
        return run(args)
    if args.command == "engine":
        return engine(args)
    if args.command == "bench":
        return bench(args)
    if args.command == "summarize":
        from harness.report.markdown import judgement_json, summary

        print(judgement_json(args.runs) if args.json else summary(args.runs), end="")
        return 0
    if args.command == "mutants":
        return mutants_command.run(args)
    if args.command == "matrix":
        from harness.commands.matrix import run_matrix

        return run_matrix(args)
    if args.command == "nightly":
        from harness.commands.nightly import run_nightly

        a = args
        return run_nightly(a.budget, a.decoder, a.model, a.device, a.dtype, a.workers, a.report_dir)
    return 2


if __name__ == "__main__":
    sys.exit(main())
