"""Each case's expected cost in seconds: what orders the cases (the costliest first, case_order.py) and what the
progress line's time left counts (progress.py), so that a run ends when its estimate says.

A case's cost is, in this order of preference:
1. its own duration in the last run recorded in the same report directory (results.json's `duration_s`, the newest
   run directory other than this run's that has one of its test functions and is of this run's kind (run_kind: the
   same decoder, engine options, model, device, dtype, budget, sampling TV, reference and prompts; a transformers
   release's sampling case costs ten times the harness decoder's, a V2 runner's greedy case twenty times V1's));
2. the median duration of that run's cases of the same test function (its other parameters);
3. its own prior, where it carries a computation its function's other cases share (case_priors: the two law cases
   that compute the sampling family, 56 s each, whose 21 other cases then take milliseconds), else the prior of its
   test function (the mean duration of its other cases), where the run is of the kind the priors were measured on
   (FUNCTION_PRIORS_FILE: default runs on the 2-core reference machine, written by `python -m
   harness.plugin.case_costs NOTE RESULTS_JSON...`), so that a first default run in a report directory orders its
   cases and counts its time left as well as a later one; for an engine's decoder, the priors measured on that
   decoder and runner (ENGINE_PRIORS_DIR, `<decoder>-<runner>.json`, e.g. `vllm-mtp-v2.json`, written by the same
   command from engine runs:
   any model, budget and fixes, pooled), since a case of vLLM's V2 in Triton's interpreter costs about ten times
   V1's and V1's several times the harness decoder's;
4. the prior of its suite (SUITE_PRIORS_S), in seconds on the 2-core reference machine.

The time left (time_left_s), with w workers: what each unfinished case still needs, spread over the workers but never
shorter than the costliest unit (an xdist group runs on one worker, its cases one after the other):
    need(case)  = max(cost - seconds it has run, 0)                      (a case not started has run 0 s)
    left        = max(sum of need / w, max over units of the unit's sum of need)
The costs are taken as seconds on this machine: a last run's durations are; the priors are the reference machine's.
(Scaling the priors by the finished cases' durations against them was tried and dropped: the sampling family is
computed by its first case, so its ratio swings the estimate of every case after it; measured in
docs/measurements/speed.md.)
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Iterable, Mapping
from pathlib import Path

from harness.contract.paths import suite_of
from harness.contract.run_options import RunOptions

RESULTS_FILE = "results.json"
# Roughly the mean case of each suite in a default run (`mtp-harness run`, tiny-deepseek-v3 float64, 2 workers,
# 2026-12-03 at edeef70, docs/measurements/speed.md): greedy 0.056 s, invariants 0.75 s (its 12 skipped cases
# included), sampling 6.4 s (the family's 160 worker-seconds over its 25 cases); the engine suite, which that run
# skips, a guess. A case of another suite (unit tests) counts as greedy.
SUITE_PRIORS_S: Mapping[str, float] = {
    "greedy": 0.055,
    "invariants": 0.75,
    "sampling": 6.5,
    "features": 0.3,
    "engine": 2.0,
}
DEFAULT_SUITE = "greedy"
FUNCTION_PRIORS_FILE = Path(__file__).with_name("function_priors.json")
ENGINE_PRIORS_DIR = Path(__file__).with_name("engine_priors")  # <decoder>-<runner>.json: an engine's cases'
HARNESS_DECODERS = ("mtp",)  # decoders whose priors are FUNCTION_PRIORS_FILE's kind, exactly
CASE_PRIOR_MIN_S, CASE_PRIOR_FACTOR = 1.0, 5.0  # a case that carries a shared computation (case_priors)
XDIST_GROUP_SUFFIX = re.compile(r"@[^\[\]@/:]+$")  # `--dist loadgroup` appends "@<group>" to node ids


def bare_nodeid(nodeid: str) -> str:
    """The node id without xdist's `@group` suffix (as results.json records it)."""
    return XDIST_GROUP_SUFFIX.sub("", nodeid)


def function_of(nodeid: str) -> str:
    """The test function: the node id without its parameters (and without xdist's `@group` suffix)."""
    return bare_nodeid(nodeid).split("[", 1)[0]


def last_durations(
    report_root: Path,
    this_run: Path | None = None,
    nodeids: Iterable[str] | None = None,
    kind: Mapping[str, object] | None = None,
) -> dict[str, float]:
    """nodeid -> seconds, from the newest run directory in report_root (not this_run) with a readable results.json,
    given this run's `nodeids` a test function in common with them (a mutation catalogue's or another suite's run in
    the same directory says nothing of these cases) and, given this run's `kind` (run_kind), of that kind; empty when
    there is none. A file that cannot be read is passed over, never an error: costs are only estimates."""
    if not report_root.is_dir():
        return {}
    functions = None if nodeids is None else {function_of(nodeid) for nodeid in nodeids}
    runs = sorted((p for p in report_root.iterdir() if (p / RESULTS_FILE).is_file()), reverse=True)
    for run in runs:
        if this_run is not None and run.resolve() == this_run.resolve():
            continue
        try:
            results = json.loads((run / RESULTS_FILE).read_text())
            if kind is not None and recorded_kind(results) != kind:
                continue
            known = {
                case["nodeid"]: float(case["duration_s"])
                for case in results["cases"]
                if case.get("duration_s") is not None
            }
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if functions is None or functions & {function_of(nodeid) for nodeid in known}:
            return known
    return {}


def durations_before(
    report_option: str | None, nodeids: Iterable[str] | None = None, kind: Mapping[str, object] | None = None
) -> dict[str, float]:
    """The last run's durations for a run given `--harness-report=DIR` (last_durations(DIR's parent, DIR, nodeids,
    kind)); none without a report directory or with 'auto' (its directory is named when the run starts: the workers,
    which order their collections by these costs, could each see another set)."""
    if not report_option or report_option == "auto":
        return {}
    return last_durations(Path(report_option).parent, Path(report_option), nodeids, kind)


def prior_key(nodeid: str) -> str:
    """A test function as the function priors name it: its file's name and the function (wherever the suites are
    installed, whatever the parameters)."""
    path, _, function = function_of(nodeid).partition("::")
    return f"{Path(path).name}::{function}"


def case_key(nodeid: str) -> str:
    """A case as the case priors name it: its file's name, the function and its parameters."""
    path, _, rest = bare_nodeid(nodeid).partition("::")
    return f"{Path(path).name}::{rest}"


def case_priors(cases: Iterable[Mapping]) -> dict[str, float]:
    """case_key -> the mean duration of each case that carries a computation its function's other cases share (the
    sampling family, the batch every forced-rejection schedule is cut from: whichever case needs it first computes
    it), pooled over the runs: a case of at least CASE_PRIOR_MIN_S and CASE_PRIOR_FACTOR times its function's median
    case. Its own cost, where it is, keeps the estimate from spreading it over cases that finish in milliseconds."""
    by_case: dict[str, list[float]] = {}
    for case in cases:
        if case.get("duration_s") is not None:
            by_case.setdefault(case_key(case["nodeid"]), []).append(float(case["duration_s"]))
    means = {key: statistics.fmean(values) for key, values in by_case.items()}
    by_function: dict[str, list[float]] = {}
    for key, mean in means.items():
        by_function.setdefault(function_of(key), []).append(mean)
    medians = {function: statistics.median(values) for function, values in by_function.items()}
    return {
        key: round(mean, 4)
        for key, mean in sorted(means.items())
        if mean >= CASE_PRIOR_MIN_S and mean >= CASE_PRIOR_FACTOR * medians[function_of(key)]
    }


def function_priors(cases: Iterable[Mapping]) -> dict[str, float]:
    """prior_key -> the mean duration of the function's cases that no case prior covers (results.json's cases, skipped
    ones included: they cost what they cost in such a run), pooled over the runs."""
    cases = [case for case in cases if case.get("duration_s") is not None]
    shared = set(case_priors(cases))
    by_function: dict[str, list[float]] = {}
    for case in cases:
        if case_key(case["nodeid"]) not in shared:
            by_function.setdefault(prior_key(case["nodeid"]), []).append(float(case["duration_s"]))
    return {function: round(statistics.fmean(values), 4) for function, values in sorted(by_function.items())}


def run_kind(options: RunOptions) -> dict[str, object]:
    """What a run's case durations depend on besides the machine: the decoder and its engine options (release, runner,
    configuration, fixes, patches, arguments), the model, its device and dtype, the budget and the sampling suite's
    TV (N grows as 1 / TV^2), the reference, the prompts file."""
    record = options.to_record()
    return {
        "decoder": options.decoder,
        "engine": record["engine"],
        "model": Path(options.model).name,
        "device": options.device,
        "dtype": options.dtype,
        "budget": options.budget,
        "sampling_tv": options.sampling_tv,
        "reference": record["reference"],
        "prompts": Path(options.prompts).name,
    }


def recorded_kind(results: Mapping) -> dict[str, object]:
    """The run_kind of a results.json (its header's options); KeyError, TypeError or ValueError where it has none."""
    return run_kind(RunOptions.from_record(results["run"]["options"]))


def load_function_priors(path: Path = FUNCTION_PRIORS_FILE) -> tuple[dict[str, str | None], dict[str, float]]:
    """The committed priors: (the kind of run they were measured on, prior_key and case_key -> seconds: the functions'
    and the cases' that carry a shared computation); nothing when the file is missing or unreadable (the suites'
    priors then)."""
    try:
        data = json.loads(path.read_text())
        priors = {**data["functions"], **data.get("cases", {})}
        return dict(data["run"]), {str(key): float(value) for key, value in priors.items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, {}


def engine_priors_file(decoder: str, runner: str | None, directory: Path = ENGINE_PRIORS_DIR) -> Path:
    """Where the priors of an engine's decoder on a runner are (the door resolves a run's runner: vLLM's v1 on CPU,
    llama.cpp's source build; `default` where none is)."""
    return directory / f"{decoder}-{runner or 'default'}.json"


def function_priors_for(
    options: RunOptions, path: Path = FUNCTION_PRIORS_FILE, engines: Path = ENGINE_PRIORS_DIR
) -> dict[str, float]:
    """The function priors where the run is of the kind they were measured on (a skipped engine test costs nothing
    under the harness's own decoder and seconds under an engine's); for an engine's decoder, those measured on its
    decoder and runner, whatever the model, budget or fixes; none elsewhere (the suites' priors then)."""
    kind, priors = load_function_priors(path)
    if kind == run_kind(options):
        return priors
    if options.decoder in HARNESS_DECODERS:
        return {}
    kind, priors = load_function_priors(engine_priors_file(options.decoder, options.engine.runner, engines))
    same = kind.get("decoder") == options.decoder and (kind.get("engine") or {}).get("runner") == options.engine.runner
    return priors if same else {}


def measured_costs(
    nodeids: Iterable[str], known: Mapping[str, float], priors: Mapping[str, float] | None = None
) -> dict[str, float]:
    """nodeid -> expected seconds, for the cases something measured gives a cost: its known duration, else its
    function's median known duration, else its own or its function's prior (`priors`, case_key and prior_key ->
    seconds: function_priors_for the run). A case left out has only its suite's prior."""
    priors = priors or {}
    by_function: dict[str, list[float]] = {}
    for nodeid, seconds in known.items():
        by_function.setdefault(function_of(nodeid), []).append(seconds)
    medians = {function: statistics.median(values) for function, values in by_function.items()}
    costs = {}
    for nodeid in nodeids:
        cost = known.get(bare_nodeid(nodeid), medians.get(function_of(nodeid)))
        if cost is None:
            cost = priors.get(case_key(nodeid), priors.get(prior_key(nodeid)))
        if cost is not None:
            costs[nodeid] = cost
    return costs


def case_costs(
    nodeids: Iterable[str], known: Mapping[str, float], priors: Mapping[str, float] | None = None
) -> dict[str, float]:
    """nodeid -> expected seconds: its measured cost (measured_costs), else its suite's prior (module docstring)."""
    nodeids = list(nodeids)
    measured = measured_costs(nodeids, known, priors)
    return {
        nodeid: measured.get(nodeid, SUITE_PRIORS_S.get(suite_of(nodeid), SUITE_PRIORS_S[DEFAULT_SUITE]))
        for nodeid in nodeids
    }


def unmeasured(
    nodeids: Iterable[str], known: Mapping[str, float], priors: Mapping[str, float] | None = None
) -> set[str]:
    """The nodeids case_costs can only guess (no measured cost: measured_costs), whose suite's prior is the harness
    decoder's mean case, which says little of an engine's (e.g. a V2 sampling family in Triton's interpreter)."""
    nodeids = list(nodeids)
    return set(nodeids) - set(measured_costs(nodeids, known, priors))


def unit_of_nodeid(nodeid: str) -> str:
    """What runs on one worker, as pytest-xdist's controller sees it: the case's group (`@group` suffix), or itself."""
    suffix = XDIST_GROUP_SUFFIX.search(nodeid)
    return suffix.group(0) if suffix else nodeid


def remaining_s(
    costs: Mapping[str, float], running_for_s: Mapping[str, float], finished: Iterable[str]
) -> dict[str, float]:
    """nodeid -> seconds it still needs, for every case not finished: need = max(cost - run so far, 0)."""
    done = set(finished)
    return {
        nodeid: max(cost - running_for_s.get(nodeid, 0.0), 0.0) for nodeid, cost in costs.items() if nodeid not in done
    }


def overruns_s(costs: Mapping[str, float], running_for_s: Mapping[str, float]) -> list[float]:
    """How far each running case has run past its expected cost (run so far - cost, where positive), longest first:
    what a time left that has run out leaves unsaid."""
    past = (ran - costs.get(nodeid, 0.0) for nodeid, ran in running_for_s.items())
    return sorted((seconds for seconds in past if seconds > 0), reverse=True)


def time_left_s(needs: Mapping[str, float], workers: int = 1) -> float:
    """left = max(sum of need / w, the costliest unit's sum of need) (module docstring)."""
    units: dict[str, float] = {}
    for nodeid, need in needs.items():
        unit = unit_of_nodeid(nodeid)
        units[unit] = units.get(unit, 0.0) + need
    return max(sum(needs.values()) / max(workers, 1), max(units.values(), default=0.0))


def main(argv: list[str] | None = None) -> int:
    """`python -m harness.plugin.case_costs NOTE RESULTS_JSON...`: write FUNCTION_PRIORS_FILE from default runs'
    results.json files, or an engine's priors (ENGINE_PRIORS_DIR) from runs of one engine decoder and runner (their
    cases pooled; NOTE: where and when they were measured, kept in the file)."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if len(args) < 2:
        print("usage: python -m harness.plugin.case_costs NOTE RESULTS_JSON...", file=sys.stderr)
        return 2
    note, paths = args[0], args[1:]
    runs = [json.loads(Path(path).read_text()) for path in paths]
    kinds = [recorded_kind(run) for run in runs]
    engine = kinds[0]["decoder"] not in HARNESS_DECODERS
    pooled = [(kind["decoder"], kind["engine"]["runner"]) if engine else kind for kind in kinds]
    if any(key != pooled[0] for key in pooled):
        print(f"the runs are of different kinds: {kinds}", file=sys.stderr)
        return 2
    kind = kinds[0]
    target = (
        engine_priors_file(kind["decoder"], kind["engine"]["runner"], ENGINE_PRIORS_DIR)
        if engine
        else FUNCTION_PRIORS_FILE
    )
    cases = [case for run in runs for case in run["cases"]]
    priors = {"measured": note, "run": kind, "functions": function_priors(cases), "cases": case_priors(cases)}
    target.parent.mkdir(exist_ok=True)
    target.write_text(json.dumps(priors, indent=1) + "\n")
    print(
        f"{target}: {len(priors['functions'])} test functions and {len(priors['cases'])} cases that carry a shared "
        f"computation, from {len(cases)} cases"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
