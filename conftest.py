"""Project-wide pytest set-up. The harness's options, markers, seeds, run budgets and Hypothesis profiles
come from its plugin (harness.plugin, registered as the `mtp_harness` pytest11 entry point)."""
