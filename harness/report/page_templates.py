"""The HTML pages' jinja2 templates (harness/report/templates/): one environment for the run report and the release
matrix's page, autoescaping every text a run brings (token text, messages, signatures), strict on a missing key."""

from __future__ import annotations

from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined


@cache
def templates() -> Environment:
    return Environment(
        loader=PackageLoader("harness.report", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
