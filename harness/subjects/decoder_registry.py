"""Decoders by name: the harness's own (in this process), every engine's (harness/subjects/engines/registry.py: its
records declare their decoders), `mutant:<name>` (the mutant catalogue), decoders registered at run time with
`@register_decoder`, entry points of the group `mtp_harness.decoders`, and `module:factory` for your own.

Light on purpose: the names are known without importing a decoder (the door answers in a fraction of a second); a
decoder's module, and torch with it, is imported when the decoder is built. Only the mutant catalogue is imported to
list its names, and only for a name that starts with `mutant:`.

A factory of your own takes (bundle, device, dtype) and returns a `Decoder`; it may carry `default_dtypes`
({"cpu": "float32", "cuda": "bfloat16"}): the dtype a run uses when --dtype is not given (else float64 on CPU, bf16 on
CUDA).
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable, Mapping
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any

from harness.contract.errors import HarnessError
from harness.contract.run_options import EngineOptions
from harness.subjects.engines.abilities import PinnedInProcess
from harness.subjects.engines.registry import engine_decoders, engine_of_decoder, engines

if TYPE_CHECKING:
    from collections.abc import Sequence

    from harness.contract.decoder import Decoder, DecodeRequest, DecodeResult
    from harness.models.loading import ModelBundle

ENTRY_POINT_GROUP = "mtp_harness.decoders"
MUTANT_PREFIX = "mutant:"
DecoderFactory = Callable[..., "Decoder"]  # (bundle, device, dtype) -> Decoder


def _target(bundle: ModelBundle) -> Decoder:
    from harness.decoding.target_decoder import TargetOnlyDecoder

    return TargetOnlyDecoder(bundle)


def _mtp(bundle: ModelBundle) -> Decoder:
    from harness.decoding.mtp_decoder import MTPDecoder

    return MTPDecoder(bundle)


# the decoders that run in the harness's process: the reference, the MTP decoder, and an engine's whose pinned release
# is the harness's own (transformers' own MTP paths: its record's PinnedInProcess)
IN_PROCESS: Mapping[str, Callable[[ModelBundle], Decoder]] = {
    "mtp": _mtp,
    "target": _target,
    **{
        name: factory
        for engine in engines().values()
        if (pinned := engine.ability(PinnedInProcess)) is not None
        for name, factory in pinned.decoders.items()
    },
}
REGISTERED: dict[str, DecoderFactory] = {}  # @register_decoder: a test file, a notebook


class UnknownDecoder(HarnessError):
    """No decoder of that name, or a `module:factory` that cannot be imported."""


class DecoderFactoryError(HarnessError):
    """A decoder factory raised, or returned something that is not a Decoder."""


def register_decoder(name: str) -> Callable[[DecoderFactory], DecoderFactory]:
    """Decorator: make `factory` available as `--decoder name`."""

    def register(factory: DecoderFactory) -> DecoderFactory:
        REGISTERED[name] = factory
        return factory

    return register


def is_module_factory(name: str) -> bool:
    """`your.module:factory`: a decoder named by where its factory lives."""
    return ":" in name and not name.startswith(MUTANT_PREFIX)


def mutant_names() -> list[str]:
    """`mutant:<name>` for every mutant of the catalogue (imports it: torch)."""
    from harness.subjects.mutant_decoders import MUTANTS

    return sorted(MUTANT_PREFIX + name for name in MUTANTS)


def known_decoders(with_mutants: bool = False) -> list[str]:
    """Every decoder name a run can use, but the module:factory form; the mutants' when asked."""
    names = {
        *IN_PROCESS,
        *engine_decoders(),
        *REGISTERED,
        *(entry.name for entry in entry_points(group=ENTRY_POINT_GROUP)),
    }
    return sorted(names) + (mutant_names() if with_mutants else [])


def unknown_decoder(name: str) -> str | None:
    """None when `name` names a decoder (or has the module:factory form, checked by importing it), else the error:
    the near matches and the known names."""
    if is_module_factory(name):
        return None
    mutant = name.startswith(MUTANT_PREFIX)
    known = known_decoders(with_mutants=mutant)
    if name in known:
        return None
    close = difflib.get_close_matches(name, known, n=3)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    listed = ", ".join(known) if mutant else f"{', '.join(known)}, {MUTANT_PREFIX}<name> (`mtp-harness mutants`)"
    return f"unknown decoder {name!r}.{hint} Known: {listed}; or module:factory for your own."


def find_factory(name: str) -> DecoderFactory:
    """The factory of a decoder that is not an engine's nor the harness's own: registered, an entry point, or
    module:factory. UnknownDecoder (with near matches) when there is none."""
    if name in REGISTERED:
        return REGISTERED[name]
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


def make_decoder(name: str, bundle: ModelBundle, engine: EngineOptions | None = None) -> Decoder:
    """Build the decoder called `name` for `bundle`; an engine's decoder runs under the engine options `engine`
    (its deployed configuration, fixes and arguments). Errors name the decoder and list the known ones."""
    from harness.contract.decoder import Decoder

    engine_record = engine_of_decoder(name, engine.version if engine is not None else None)
    try:
        if engine_record is not None:
            decoder = engine_record.build(name, bundle, engine or EngineOptions())
        elif name in IN_PROCESS:
            decoder = IN_PROCESS[name](bundle)
        elif name.startswith(MUTANT_PREFIX):
            decoder = mutant_decoder(name.removeprefix(MUTANT_PREFIX), bundle)
        else:
            decoder = find_factory(name)(bundle, bundle.device, bundle.dtype)
    except HarnessError:
        raise
    except Exception as error:
        raise DecoderFactoryError(f"decoder factory {name!r} raised {type(error).__name__}: {error}") from error
    if not isinstance(decoder, Decoder):
        raise DecoderFactoryError(
            f"decoder factory {name!r} returned {type(decoder).__name__}, which has no `name` and `decode(requests)`"
        )
    return decoder if engine_record is not None else checking_passes(decoder)  # an engine's checks its own wire


def checking_passes(decoder: Decoder) -> Decoder:
    """The decoder, its decode checking every result's passes against the pass contract as they enter the harness
    (harness/contract/passes.py): its own decode, wrapped on the instance, so it stays the decoder it was."""
    from harness.contract.passes import with_pass_contract

    decode = decoder.decode

    def decode_checked(requests: Sequence[DecodeRequest]) -> list[DecodeResult]:
        return with_pass_contract(requests, decode(requests), decoder.name)

    object.__setattr__(decoder, "decode", decode_checked)  # a frozen dataclass's instance too
    return decoder


def mutant_decoder(name: str, bundle: ModelBundle) -> Decoder:
    """The decoder `mutant:<name>`: the correct decoder with the mutant's bug put in."""
    from harness.subjects.mutant_decoders import MUTANTS

    if name not in MUTANTS:
        raise UnknownDecoder(unknown_decoder(MUTANT_PREFIX + name) or f"unknown mutant {name!r}")
    decoder = MUTANTS[name](bundle)
    decoder.name = MUTANT_PREFIX + name
    return decoder


def default_dtype(name: str, device: str) -> str | None:
    """The dtype decoder `name` asks for on `device` ('cpu', 'cuda:0', ...) when none is given, if it says."""
    engine = engine_of_decoder(name)
    if engine is not None:
        wanted: Mapping[str, Any] = engine.default_dtypes
    elif name in IN_PROCESS or name.startswith(MUTANT_PREFIX):
        return None
    else:
        wanted = getattr(find_factory(name), "default_dtypes", None) or {}
    return wanted.get(device.split(":")[0])
