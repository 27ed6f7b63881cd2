"""The engines the harness drives, read from their records (each engine package's `ENGINE`,
harness/subjects/engines/engine.py). Adding an engine to the harness is a package under harness/subjects/engines/ and
one line in ENGINES below; an engine packaged elsewhere registers its record under the entry-point group
`mtp_harness.engines` (`toy = my_package.toy_engine:ENGINE`). Nothing else lists engines or their decoders.

Light on purpose (no torch): the door and the plugin read it before anything loads.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import cache
from importlib.metadata import entry_points

from harness.contract.errors import HarnessError
from harness.subjects.engines import llamacpp, transformers, vllm
from harness.subjects.engines.abilities import PinnedInProcess
from harness.subjects.engines.engine import Engine

ENGINES: tuple[Engine, ...] = (
    vllm.ENGINE,
    llamacpp.ENGINE,
    transformers.ENGINE,
)
ENTRY_POINT_GROUP = "mtp_harness.engines"


@cache
def engines_packaged_elsewhere() -> tuple[Engine, ...]:
    """The engine records registered under ENTRY_POINT_GROUP (read once per process)."""
    found = []
    for entry in entry_points(group=ENTRY_POINT_GROUP):
        record = entry.load()
        if not isinstance(record, Engine):
            raise HarnessError(
                f"entry point {entry.name} = {entry.value} ({ENTRY_POINT_GROUP}) is not an Engine record"
            )
        found.append(record)
    return tuple(found)


def engines() -> Mapping[str, Engine]:
    """Every engine by name: the harness's own (ENGINES), then those packaged elsewhere. Two engines may not share a
    name or a decoder name."""
    by_name: dict[str, Engine] = {}
    decoders: dict[str, str] = {}
    for engine in (*ENGINES, *engines_packaged_elsewhere()):
        if engine.name in by_name:
            raise HarnessError(f"two engines are named {engine.name!r}")
        by_name[engine.name] = engine
        for decoder in engine.decoders:
            if decoder in decoders:
                raise HarnessError(f"decoder {decoder!r} belongs to {decoders[decoder]} and to {engine.name}")
            decoders[decoder] = engine.name
    return by_name


def engine_named(name: str) -> Engine:
    """The engine called `name` (as `mtp-harness engine install NAME` takes it); a HarnessError lists the known ones."""
    known = engines()
    if name in known:
        return known[name]
    close = difflib.get_close_matches(name, list(known), n=2)
    hint = f" Did you mean {', '.join(close)}?" if close else ""
    raise HarnessError(f"unknown engine {name!r}.{hint} Known: {', '.join(sorted(known))}")


def engine_of_decoder(decoder: str, version: str | None = None, any_release: bool = False) -> Engine | None:
    """The engine behind a decoder name at `version` (--engine-version; None: the pinned release), or None for a
    decoder that runs in the harness's process: an engine whose pinned release is the harness's own (transformers) is
    the decoder's engine only for another release, or for `any_release` (the engines a release matrix may test)."""
    engine = next((engine for engine in engines().values() if decoder in engine.decoders), None)
    if engine is not None and engine.ability(PinnedInProcess) and version is None and not any_release:
        return None
    return engine


def engine_decoders() -> dict[str, Engine]:
    """Every engine's decoder names, with their engine."""
    return {decoder: engine for engine in engines().values() for decoder in engine.decoders}
