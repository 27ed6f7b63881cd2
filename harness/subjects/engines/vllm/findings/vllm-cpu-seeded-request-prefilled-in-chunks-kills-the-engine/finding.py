"""vllm-cpu-seeded-request-prefilled-in-chunks-kills-the-engine: on CPU, a seeded sampled request whose prompt is
prefilled in chunks kills the engine: after the discarded chunk, Model Runner V1 rewinds the request's generator by 4
Philox offsets, which a CPU generator does not have (`RuntimeError: CPU Generator does not use offset`).

Its record (FINDING: where it was found, the tests it fails, its signature in words) and its signature, the predicate
`cpu_generator_asked_for_its_offset`. Beside it: its fix (fix.py), its standalone reproducer (reproducer.py) and the
releases its reproducer was measured on (versions.json); its write-up is
docs/findings/vllm-cpu-seeded-request-prefilled-in-chunks-kills-the-engine.md."""

from __future__ import annotations

from harness.subjects.engines.findings import FailedCase, Finding
from harness.subjects.engines.vllm.findings.common import FOUND_IN, V1_ONLY
from harness.subjects.engines.watched_tests import FEATURE_LAWS, RNG_ISOLATION

CPU_GENERATOR_OFFSET = "CPU Generator does not use offset"


def cpu_generator_asked_for_its_offset(case: FailedCase) -> bool:
    """The engine died on torch's `RuntimeError: CPU Generator does not use offset`: Model Runner V1 rewinding a
    seeded request's CPU generator after a prefill chunk that ended inside its prompt
    (`GPUModelRunner._bookkeeping_sync`). The error arrives as the text of the decode call's EngineError."""
    return CPU_GENERATOR_OFFSET in case.message


FINDING = Finding(
    slug="vllm-cpu-seeded-request-prefilled-in-chunks-kills-the-engine",
    title="on CPU, a seeded sampled request whose prompt is prefilled in chunks kills the engine: after the "
    "discarded chunk, Model Runner V1 rewinds the request's generator by 4 Philox offsets, which a CPU generator "
    "does not have (`RuntimeError: CPU Generator does not use offset`)",
    engine="vllm",
    decoders=("vllm-mtp", "vllm"),  # no speculation needed: plain vLLM dies the same way
    found_in=FOUND_IN,
    runners=V1_ONLY,
    flavours=("cpu",),  # CUDA generators have offsets; the CPU build's have none
    # the law cases of the 36-token prompt: thousands of seeded requests in one call, so the step's token budget
    # splits one of their prompts (the expand-kernel finding watches them too)
    failing={"*": (f"{FEATURE_LAWS}[law-*-repetitive-01]",)},
    # under `--engine-config chunked-prefill` (32 tokens a step) the RNG-isolation check's seeded request is split
    # where its batch fills the step: measured on every case at the smoke budget; elsewhere its prompts fit
    may_fail={"*": (f"{RNG_ISOLATION}[*]",)},
    signature="the engine's error is torch's `RuntimeError: CPU Generator does not use offset` (in the decode "
    "call's EngineError), which only Model Runner V1's rewind of a seeded request's generator after a prefill chunk "
    "that ended inside the prompt raises",
    explains=cpu_generator_asked_for_its_offset,
)
