"""The fixtures the suites use: the session seed and each test's seed, the model under test (loaded once per
session), the decoder under test, `require` (skip what the decoder declares it cannot serve) and the prompts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from harness.contract.seeds import derive_seed
from harness.plugin.known import ENGINE_ARGS, ENGINE_CONFIG, ENGINE_FIXES, REFERENCE
from harness.plugin.options import resolved_dtype
from harness.plugin.session import SEED
from harness.subjects.engines.supported import ENGINE_REFERENCE

if TYPE_CHECKING:  # torch and transformers load lazily: a plain `pytest --help` stays fast
    from harness.contract.decoder import Decoder
    from harness.models.loading import ModelBundle
    from harness.models.prompts import Prompt


@pytest.fixture(scope="session")
def harness_seed(pytestconfig: pytest.Config) -> int:
    """The session seed (printed in the report header)."""
    return pytestconfig.stash[SEED]


@pytest.fixture
def test_seed(request: pytest.FixtureRequest, harness_seed: int) -> int:
    """This test's seed: session seed + crc32(node id); stable under reordering and pytest-xdist."""
    return derive_seed(harness_seed, request.node.nodeid)


@pytest.fixture(scope="session")
def bundle(pytestconfig: pytest.Config) -> ModelBundle:
    """The model under test (--model, --device, --dtype), loaded once per session; under --reference engine its
    card (config and tokenizer, no weights: harness/models/card.py)."""
    model, device, dtype = (
        pytestconfig.getoption("--model"),
        pytestconfig.getoption("--device"),
        resolved_dtype(pytestconfig),
    )
    if pytestconfig.stash[REFERENCE] == ENGINE_REFERENCE:
        from harness.models.card import card_for

        return card_for(model, device, dtype)  # type: ignore[return-value] - stands for the bundle without weights
    from harness.models.loading import bundle_for

    return bundle_for(model, device, dtype)


@pytest.fixture(scope="session")
def decoder(pytestconfig: pytest.Config, bundle: ModelBundle) -> Iterator[Decoder]:
    """The decoder under test (--decoder), built once per session for the model under test."""
    from harness.subjects.registry import make_decoder

    stash = pytestconfig.stash
    decoder = make_decoder(
        pytestconfig.getoption("--decoder"), bundle, stash[ENGINE_FIXES], stash[ENGINE_CONFIG], stash[ENGINE_ARGS]
    )
    yield decoder
    close = getattr(decoder, "close", None)
    if close is not None:
        close()


@pytest.fixture
def require(decoder: Decoder) -> Callable[..., None]:
    """require(*capabilities, **values): skip the test when the decoder under test declares it cannot serve it,
    naming the capability ("forced_drafts", "steps") or the exact request value (num_draft_tokens=3) it lacks."""
    from harness.contract.decoder import cannot_serve

    def needs(*capabilities: str, **values: object) -> None:
        reason = cannot_serve(decoder, *capabilities, **values)
        if reason:
            pytest.skip(reason)

    return needs


@pytest.fixture(scope="session")
def prompts(pytestconfig: pytest.Config) -> list[Prompt]:
    """The prompt fixtures (--prompts)."""
    from harness.models.prompts import load_prompts

    return load_prompts(pytestconfig.getoption("--prompts"))
