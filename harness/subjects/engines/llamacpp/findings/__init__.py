"""The bugs the suites found in llama.cpp, one folder each, named by its slug: its record and signature
(finding.py), its fix (fix.patch), its standalone reproducer (reproducer.py) and the releases that reproducer was
measured on (versions.json); its write-up is docs/findings/<slug>.md. Discovered, not listed: a new folder is a new
finding. common.py holds what several findings name (the release they were found in, test ids).

Imports: harness.contract up to harness.triage, and harness.subjects.engines' shared modules."""

from __future__ import annotations

from pathlib import Path

from harness.subjects.engines.findings import discover_findings

FINDINGS = discover_findings(Path(__file__).parent, __name__)
