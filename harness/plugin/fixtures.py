"""The fixtures the suites use: the run's options, the session seed and each test's seed, the model under test (loaded
once per session), the decoder under test, `require` (skip what the decoder declares it cannot serve) and the
prompts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

from harness.contract.run_options import Reference, RunOptions
from harness.contract.seeds import derive_seed
from harness.plugin.session import run_options as options_of

if TYPE_CHECKING:  # torch and transformers load lazily: a plain `pytest --help` stays fast
    from harness.contract.decoder import Decoder
    from harness.models.loading import ModelBundle
    from harness.models.prompts import Prompt


@pytest.fixture(scope="session")
def run_options(pytestconfig: pytest.Config) -> RunOptions:
    """The run's options (harness/contract/run_options.py), read once, with the session seed resolved."""
    return options_of(pytestconfig)


@pytest.fixture(scope="session")
def harness_seed(run_options: RunOptions) -> int:
    """The session seed (printed in the report header)."""
    return int(run_options.seed)


@pytest.fixture
def test_seed(request: pytest.FixtureRequest, harness_seed: int) -> int:
    """This test's seed: session seed + crc32(node id); stable under reordering and pytest-xdist."""
    return derive_seed(harness_seed, request.node.nodeid)


@pytest.fixture(scope="session")
def bundle(run_options: RunOptions) -> ModelBundle:
    """The model under test (--harness-model, --harness-device, --harness-dtype), loaded once per session; under
    --harness-reference engine its card (config and tokenizer, no weights: harness/models/card.py)."""
    from harness.models.card import model_of_run

    weights = run_options.reference is not Reference.ENGINE  # a card stands for the bundle without them
    return model_of_run(run_options.model, run_options.device, run_options.dtype, weights)  # type: ignore[return-value]


@pytest.fixture(scope="session")
def decoder(run_options: RunOptions, bundle: ModelBundle) -> Iterator[Decoder]:
    """The decoder under test (--harness-decoder), built once per session for the model under test, under the run's
    engine options."""
    from harness.subjects.decoder_registry import make_decoder

    decoder = make_decoder(run_options.decoder, bundle, run_options.engine)
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
def prompts(run_options: RunOptions) -> list[Prompt]:
    """The prompt fixtures (--harness-prompts)."""
    from harness.models.prompts import load_prompts

    return load_prompts(run_options.prompts)
