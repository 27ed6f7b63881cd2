"""Queueing: more requests than the engine's sequence limit, so requests wait and start while others finish.
Greedy output must equal the reference and the drafts the checkpoint's MTP computation; a seeded sampled request
must sample what it samples when every request is scheduled at once (its passes and draws are its own)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.engine


def test_requests_queued_behind_the_sequence_limit_decode_as_the_reference(
    configured, engine_prompts, references_of, run_checked
):
    run_checked(configured("queue"), references_of(engine_prompts))


def test_a_queued_seeded_request_samples_what_it_samples_scheduled_at_once(
    configured, engine, engine_prompts, sampled_requests, shown, same_samples
):
    requests = sampled_requests(engine_prompts)
    queue = configured("queue")
    queued = queue.decode(requests)
    shown(queue)
    same_samples(requests, engine.decode(requests), queued, ("scheduled at once", "queued"))
