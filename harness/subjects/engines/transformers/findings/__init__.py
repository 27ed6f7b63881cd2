"""The bugs the suites found in transformers releases, one folder each, named by its slug: its record and signature
(finding.py), its standalone reproducer (reproducer.py) and the releases that reproducer was measured on
(versions.json, written by `mtp-harness matrix --record`); its write-up is docs/findings/<slug>.md. Discovered, not
listed: a new folder is a new finding. None has a fix: the findings' fixes are written for an engine's pinned release
(--engine-fixes), and these bugs are in releases other than the harness's own, which run as shipped.

Imports: harness.contract up to harness.triage, and harness.subjects.engines' shared modules."""

from __future__ import annotations

from pathlib import Path

from harness.subjects.engines.findings import discover_findings

FINDINGS = discover_findings(Path(__file__).parent, __name__)
