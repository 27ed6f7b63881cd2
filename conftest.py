"""Project-wide pytest set-up. The harness's options, markers and seeds come from its plugin (harness.plugin,
registered as the `mtp_harness` pytest11 entry point); this file only picks the Hypothesis profile."""

import os

from hypothesis import HealthCheck, settings

# ci: quick, on every commit. nightly: thorough. Chosen with MTP_HARNESS_HYPOTHESIS_PROFILE.
settings.register_profile("ci", max_examples=25, deadline=None, derandomize=True)
settings.register_profile(
    "nightly", max_examples=400, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(os.environ.get("MTP_HARNESS_HYPOTHESIS_PROFILE", "ci"))
