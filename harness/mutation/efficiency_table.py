"""The efficiency table of `mtp-harness mutants --efficiency`: for every mutant the sampling suite caught,
the samples (first-token-law case: harness/mutation/efficiency.py) or sequences (whole-sequence case:
harness/mutation/position_efficiency.py) to its first rejection against the ideal test."""

from __future__ import annotations

import re
from dataclasses import asdict

from harness.mutation.efficiency import measure
from harness.mutation.position_efficiency import measure_position

CASE_IN_NODEID = re.compile(r"\[([^\]]+)\]$")


def efficiency_rows(table: dict, model: str, device: str, dtype: str | None) -> list[dict]:
    """For every mutant the sampling suite caught: its efficiency record (report schema); on a whole-sequence
    case the figures count sequences (harness/mutation/position_efficiency.py)."""
    from harness.checks.sampling_cases import case_grid, p_values_per_case
    from harness.models.loading import bundle_for

    bundle = bundle_for(model, device, dtype or ("bfloat16" if device.startswith("cuda") else "float64"))
    kinds = {c.id: c.kind for c in case_grid()}
    family_size = sum(p_values_per_case(c) for c in case_grid())
    rows = []
    for row in table["rows"]:
        found = CASE_IN_NODEID.search(row["first_failure"].get("sampling", "") or "")
        if row["cells"].get("sampling") != "caught" or not found or found.group(1) not in kinds:
            continue
        how = measure if kinds[found.group(1)] == "law" else measure_position  # PIT cases: sequences to reject
        try:
            result = asdict(how(row["mutant"], found.group(1), bundle, family_size))
        except Exception as error:  # one mutant's failure must not lose the others' figures
            rows.append({"mutant": row["mutant"], "case": found.group(1), "error": f"{type(error).__name__}: {error}"})
            continue
        result["streams"] = list(result["streams"])
        rows.append(result)
    return rows
