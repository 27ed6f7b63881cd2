"""Decoders by name: the built-ins, `mutant:<name>` entries, entry points, and `module:factory` for your own.

Lookups flow one way: this module reads harness.subjects.builtin and harness.subjects.mutants, which import nothing
of it; `register_decoder` is for code outside the harness (a test file, a notebook).

A factory takes (bundle, device, dtype) and returns a `Decoder`. A factory may carry `default_dtypes`
({"cpu": "float32", "cuda": "bfloat16"}): the dtype a run uses when --dtype is not given (else float64
on CPU, bf16 on CUDA). Register one with `@register_decoder`,
expose it from your package under the entry-point group `mtp_harness.decoders`, or name it directly
as `your.module:factory` (e.g. `--decoder my_engine.harness:make_decoder`).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points

import torch

from harness.contract.decoder import Decoder
from harness.contract.errors import HarnessError
from harness.models.loading import ModelBundle
from harness.subjects.engines.configurations import DEFAULT
from harness.subjects.names import ENTRY_POINT_GROUP, MUTANT_PREFIX, REGISTERED, is_module_factory, unknown_decoder

DecoderFactory = Callable[[ModelBundle, torch.device, torch.dtype], Decoder]
_FACTORIES: dict[str, DecoderFactory] = REGISTERED  # names.known_decoders() reads it without importing this module


class UnknownDecoder(HarnessError):
    """No decoder of that name, or a `module:factory` that cannot be imported."""


class DecoderFactoryError(HarnessError):
    """A decoder factory raised, or returned something that is not a Decoder."""


def register_decoder(name: str) -> Callable[[DecoderFactory], DecoderFactory]:
    """Decorator: make `factory` available as `--decoder name`."""

    def register(factory: DecoderFactory) -> DecoderFactory:
        _FACTORIES[name] = factory
        return factory

    return register


def make_decoder(
    name: str,
    bundle: ModelBundle,
    engine_fixes: Sequence[str] = (),
    engine_config: str = DEFAULT,
    engine_args: Mapping[str, object] | None = None,
) -> Decoder:
    """Build the decoder called `name` for `bundle`; errors name the decoder and list the known ones.
    engine_fixes: the findings whose documented fix an engine subject runs with; engine_config: the deployed
    configuration it runs under; engine_args: the engine's own arguments (--engine-arg). Its factory takes them."""
    factory = find_factory(name)
    options: dict[str, object] = {}
    if engine_fixes:
        options["engine_fixes"] = tuple(engine_fixes)
    if engine_config != DEFAULT:
        options["engine_config"] = engine_config
    if engine_args:
        options["engine_args"] = dict(engine_args)
    try:
        decoder = factory(bundle, bundle.device, bundle.dtype, **options)
    except HarnessError:
        raise
    except Exception as error:
        raise DecoderFactoryError(f"decoder factory {name!r} raised {type(error).__name__}: {error}") from error
    if not isinstance(decoder, Decoder):
        raise DecoderFactoryError(
            f"decoder factory {name!r} returned {type(decoder).__name__}, which has no `name` and `decode(requests)`"
        )
    return decoder


def default_dtype(name: str, device: str) -> str | None:
    """The dtype decoder `name` asks for on `device` ('cpu', 'cuda:0', ...) when none is given, if it says."""
    wanted = getattr(find_factory(name), "default_dtypes", None) or {}
    return wanted.get(device.split(":")[0])


def find_factory(name: str) -> DecoderFactory:
    """The factory behind a decoder name; UnknownDecoder (with near matches) when there is none."""
    from harness.subjects.builtin import BUILTIN_DECODERS
    from harness.subjects.mutants import MUTANTS, mutant_decoder

    if name in BUILTIN_DECODERS:
        return BUILTIN_DECODERS[name]
    if name.startswith(MUTANT_PREFIX) and name.removeprefix(MUTANT_PREFIX) in MUTANTS:
        return lambda bundle, device, dtype: mutant_decoder(name.removeprefix(MUTANT_PREFIX), bundle)
    if name in _FACTORIES:
        return _FACTORIES[name]
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        if entry.name == name:
            return entry.load()
    if is_module_factory(name):
        module_name, _, attribute = name.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as error:
            raise UnknownDecoder(f"decoder {name!r}: cannot import module {module_name!r}: {error}") from error
        try:
            return getattr(module, attribute)
        except AttributeError:
            raise UnknownDecoder(f"decoder {name!r}: module {module_name!r} has no {attribute!r}") from None
    raise UnknownDecoder(unknown_decoder(name) or f"unknown decoder {name!r}")
