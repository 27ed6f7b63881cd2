"""The engine suite's evidence as text: the counters a check's deployed configuration requires, with their values
(a `configuration_evidence` record, harness/contract/records.py), for the HTML report and the markdown summary alike."""

from __future__ import annotations

from harness.contract.records import ConfigurationEvidenceRecord


def required_counters(record: ConfigurationEvidenceRecord, mark_missing: bool = False) -> str:
    """'name value, ...' of the counters the configuration requires ("none required" where it needs none); with
    mark_missing, a counter that stayed 0 says so."""
    counters = record["evidence"]
    shown = ", ".join(
        f"{name} {counters.get(name, 0)}"
        + (" (required, stayed 0)" if mark_missing and counters.get(name, 0) <= 0 else "")
        for name in record["required"]
    )
    return shown or "none required"
