"""Failure triage: a run's failures grouped by cause (groups.py), a group's smallest case shrunk to a
minimal one on the run's own decoder (shrink.py, minimal_cases.py), and its standalone reproducer script
(reproducer.py).

Imports: harness.contract, harness.models, harness.decoding, harness.stats, harness.checks."""
