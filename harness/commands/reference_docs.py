"""The docs' generated pages, written from the code that holds their facts: the option reference
(docs/reference/options.md) from the table of run options. `python -m harness.commands.reference_docs` writes them;
`--check` exits 1 when a committed page is stale (`nox -s docs` runs it; tests/test_run_options.py checks the same)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from harness.contract.paths import REPO_ROOT
from harness.contract.run_options import options_reference

OPTIONS_PAGE = """# Run options

Every option of a run, from the one table the command line, the pytest plugin, the door and the replay commands
are built from (`RUN_OPTION_TABLE` in `harness/contract/run_options.py`; this page is written from it by
`python -m harness.commands.reference_docs`). `mtp-harness run` takes each as `--NAME` and, as pytest spells it,
`--harness-NAME`; pytest takes `--harness-NAME`. Each is checked at the door (`harness/door/`) before any test runs,
in the order of this table: a mistake stops the run with one line naming the option and the value, exit status 2.

{table}"""

PAGES: dict[str, Callable[[], str]] = {
    "docs/reference/options.md": lambda: OPTIONS_PAGE.format(table=options_reference()),
}


def stale_pages(root: Path) -> list[str]:
    """The generated pages whose committed text differs from what the code gives now."""
    return [name for name, page in PAGES.items() if (root / name).read_text() != page()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.commands.reference_docs", description=__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1, naming them, when pages are stale")
    args = parser.parse_args(argv)
    if REPO_ROOT is None:
        print("the docs are the clone's; this harness is installed", file=sys.stderr)
        return 2
    if args.check:
        stale = stale_pages(REPO_ROOT)
        for name in stale:
            print(f"{name} is stale: python -m harness.commands.reference_docs", file=sys.stderr)
        return 1 if stale else 0
    for name, page in PAGES.items():
        (REPO_ROOT / name).write_text(page())
    return 0


if __name__ == "__main__":
    sys.exit(main())
