"""A failure group's reproducer: a small self-contained Python script that feeds the group's minimal request
to the decoder alone. Greedy: it prints expected (target-only greedy) against actual tokens, exit status 1
when they differ. Invariants: it runs the decoder with its inspection hook, checks every pass
(harness/checks/invariants.py) and prints the violations, exit status 1 when there are any. `--decoder NAME` runs
the same request on another decoder (e.g. `mtp`, the correct one).

Every value is written as a Python literal of numbers or repr()-quoted strings: nothing from the run is
executed as code."""

from __future__ import annotations

from typing import Any

from harness.contract.records import GroupRecord, RunHeader
from harness.contract.run_options import RunOptions

PREAMBLE = '''"""mtp-harness reproducer: run {run_id}, failure group {group} ({count} cases; cause: CAUSE).
Minimal case (batch of one): k = {k}, {forced_count} forced draft(s), {new_tokens} new tokens, {prompt_tokens}
prompt tokens. Usage: python {filename} [--decoder NAME]; exit status 1 when {failure}."""

import argparse
import sys

from harness.api import DecodeRequest, SamplingConfig, load_bundle
from harness.checks.divergence import first_divergence
from harness.checks.invariants import decode_inspected
from harness.contract.run_options import EngineOptions
from harness.subjects.decoder_registry import make_decoder

CAUSE = {signature!r}
DECODER = {decoder!r}
MODEL = {model!r}
DEVICE = {device!r}
DTYPE = {dtype!r}
# an engine subject's deployed configuration, fixes and arguments, as the run had them
ENGINE_OPTIONS = EngineOptions(configuration={configuration!r}, fixes={fixes!r}, arguments={arguments!r})
REQUEST = DecodeRequest(
    prompt_ids={prompt_ids!r},
    max_new_tokens={new_tokens!r},
    sampling=SamplingConfig(temperature={temperature!r}, top_k={top_k!r}, top_p={top_p!r}),
    seed={seed!r},
    num_draft_tokens={k!r},
    draft_mode={draft_mode!r},
    eos_token_ids={eos!r},
    forced_drafts={forced!r},  # output position -> the draft token the decoder must propose there
)


def print_passes(result):
    for step in result.steps:
        drafts, emitted = list(step.drafts), list(step.emitted)
        print(f"  pass at {{step.start}}: drafts {{drafts}}, accepted {{step.accepted}}, emitted {{emitted}}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decoder", default=DECODER, help=f"decoder to run (default {{DECODER}})")
    decoder_name = parser.parse_args().decoder
    bundle = load_bundle(MODEL, device=DEVICE, dtype=DTYPE)
    decoder = make_decoder(decoder_name, bundle, ENGINE_OPTIONS if decoder_name == DECODER else None)
'''

# what main() does after building the decoder, per kind of failure
GREEDY_CHECK = """    eos = REQUEST.eos_token_ids
    plain = DecodeRequest(REQUEST.prompt_ids, REQUEST.max_new_tokens, eos_token_ids=eos)
    [expected] = make_decoder("target", bundle).decode([plain])
    [actual] = decoder.decode([REQUEST])
    show = bundle.tokenizer.decode
    print(f"decoder  {{decoder_name}}")
    print(f"expected {{list(expected.token_ids)}}  {{show(expected.token_ids)!r}}")
    print(f"actual   {{list(actual.token_ids)}}  {{show(actual.token_ids)!r}}")
    print_passes(actual)
    index = first_divergence(expected.token_ids, actual.token_ids)
    if index is None:
        print("same tokens: the case passes on this decoder")
        print("not reproduced")
        return 0
    print(f"first divergence at generated index {{index}}")
    print("BUG REPRODUCED")
    return 1
"""

INVARIANTS_CHECK = """    if not hasattr(decoder, "observer"):
        print(f"decoder {{decoder_name}} has no inspection hook (an observer attribute)")
        return 2
    [result], violations, snapshots = decode_inspected(decoder, bundle, [REQUEST])
    print(f"decoder  {{decoder_name}}: {{list(result.token_ids)}}")
    print_passes(result)
    if not violations:
        print(f"every one of {{len(snapshots)}} passes is clean: the case passes on this decoder")
        print("not reproduced")
        return 0
    print(f"{{len(violations)}} invariant violations over {{len(snapshots)}} passes:")
    for violation in violations[:8]:
        print("  " + violation.describe())
    print("BUG REPRODUCED")
    return 1
"""

ENDING = """

if __name__ == "__main__":
    sys.exit(main())
"""


def case_fields(group: GroupRecord, run: RunHeader, filename: str) -> dict[str, Any]:
    """The values a reproducer template is filled with: the group, the run and its minimal case, each a plain
    number, string, tuple or dict of numbers (written into the script with repr())."""
    minimal = group["minimal"]
    case = minimal["minimal"]
    dtype = run.get("dtype")
    engine = RunOptions.from_record(run.get("options") or {}).engine
    return {
        "run_id": str(run.get("run_id", "")).replace('"', ""),
        "group": group["group"],
        "count": group["count"],
        "signature": str(group["signature"]),
        "k": int(case["num_draft_tokens"]),
        "new_tokens": int(case["max_new_tokens"]),
        "prompt_tokens": len(case["prompt_ids"]),
        "filename": filename,
        "decoder": str(run["decoder"]),
        "model": str(run["model"]),
        "device": str(run["device"]),
        "dtype": str(dtype) if dtype and dtype != "default" else "float64",
        "prompt_ids": tuple(int(t) for t in case["prompt_ids"]),
        "eos": tuple(int(t) for t in case["eos_token_ids"]),
        "forced": {int(position): int(token) for position, token in minimal["forced_drafts"].items()},
        "expected": tuple(int(token["id"]) for token in minimal.get("reference_tokens", ())),
        "temperature": float(case.get("temperature", 0.0)),
        "top_k": int(case.get("top_k", 0)),
        "top_p": float(case.get("top_p", 1.0)),
        "seed": int(case.get("seed", 0)),
        "draft_mode": str(case.get("draft_mode", "greedy")),
        "configuration": str(engine.configuration),
        "fixes": tuple(str(slug) for slug in engine.fixes),
        "arguments": tuple((str(name), value) for name, value in engine.arguments),
    }


def reproducer_script(group: GroupRecord, run: RunHeader, filename: str) -> str:
    """The script for `group` (which has a reproduced minimal case) of the run described by `run`."""
    fields = case_fields(group, run, filename)
    invariants = group["minimal"].get("kind") == "invariants"
    template = PREAMBLE + (INVARIANTS_CHECK if invariants else GREEDY_CHECK) + ENDING
    failure = "an invariant breaks after a pass" if invariants else "the tokens differ from target-only greedy"
    return template.format(failure=failure, forced_count=len(fields["forced"]), **fields)
