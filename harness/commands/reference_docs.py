"""The docs' generated parts, written from the code that holds their facts: the option reference
(docs/reference/options.md) from the table of run options, and the findings' tables (docs/findings/index.md and the
README) from the findings' records and folders. Each part sits between two markers in its page; the prose around it is
written by hand. `python -m harness.commands.reference_docs` writes them; `--check` exits 1 naming a stale page
(tests/test_reference_docs.py checks the same on every commit)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from harness.contract.paths import REPO_ROOT
from harness.contract.run_options import options_reference

BEGIN = "<!-- written by `python -m harness.commands.reference_docs`: {part} -->"
END = "<!-- end of {part} -->"


def the_findings() -> tuple:
    """The harness's own engines' findings, engine by engine (not those of engines packaged elsewhere)."""
    from harness.subjects.engines.registry import ENGINES

    return tuple(finding for engine in ENGINES for finding in engine.findings)


def findings_index(root: Path) -> str:
    from harness.report.findings_index import findings_table

    return findings_table(the_findings(), root)


def readme_findings(root: Path) -> str:
    from harness.report.findings_index import readme_table

    return readme_table(the_findings(), root)


# (page, part) -> the part's text
PARTS: dict[tuple[str, str], Callable[[Path], str]] = {
    ("docs/reference/options.md", "the run options"): lambda root: options_reference(),
    ("docs/findings/index.md", "the findings"): findings_index,
    ("README.md", "the findings"): readme_findings,
}


def with_parts(page: str, text: str, root: Path) -> str:
    """The page's text with each of its generated parts written anew between its markers."""
    for (name, part), write in PARTS.items():
        if name != page:
            continue
        begin, end = BEGIN.format(part=part), END.format(part=part)
        if begin not in text or end not in text:
            raise SystemExit(f"{page}: no markers for {part!r} ({begin} ... {end})")
        head, rest = text.split(begin, 1)
        text = f"{head}{begin}\n{write(root)}{end}{rest.split(end, 1)[1]}"
    return text


def stale_pages(root: Path) -> list[str]:
    """The pages whose generated parts differ from what the code gives now."""
    pages = sorted({page for page, _ in PARTS})
    return [page for page in pages if (root / page).read_text() != with_parts(page, (root / page).read_text(), root)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.commands.reference_docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1, naming them, when pages are stale")
    args = parser.parse_args(argv)
    if REPO_ROOT is None:
        print("the docs are the clone's; this harness is installed", file=sys.stderr)
        return 2
    stale = stale_pages(REPO_ROOT)
    if args.check:
        for page in stale:
            print(f"{page} is stale: python -m harness.commands.reference_docs", file=sys.stderr)
        return 1 if stale else 0
    for page in stale:
        (REPO_ROOT / page).write_text(with_parts(page, (REPO_ROOT / page).read_text(), REPO_ROOT))
        print(f"wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
