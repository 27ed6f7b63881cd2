"""`mtp-harness engine`: the environments of out-of-process engines (harness/subjects/engines/environments.py):
install one at any release (idempotent), list them, remove one, or say whether one is installed; `--build` builds an
engine from its source (llama.cpp) with the harness's instrumentation, the findings' fixes and patches of yours."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from harness.contract.errors import HarnessError
from harness.contract.run_options import NO_FIXES, EngineOptions
from harness.subjects.engines.abilities import PinnedInProcess, SourceBuild

if TYPE_CHECKING:
    from harness.subjects.engines.engine import Engine

HELP = "the environments of out-of-process engines: install one at any release, list, remove, or show one"
USAGE_ERROR = 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "action",
        choices=["install", "status", "list", "remove"],
        help="install (idempotent), status, list (every installed environment) or remove (one, with --version)",
    )
    parser.add_argument(
        "name", nargs="?", help="engine name (harness/subjects/engines/registry.py: vllm, llama.cpp); not for list"
    )
    parser.add_argument(
        "--version",
        default=None,
        help="the engine's release (e.g. 0.31.0 for vLLM, 2026.9.11063 for llama.cpp's xllamacpp), each in an "
        "environment of its own beside the others; default: the pinned one",
    )
    parser.add_argument(
        "--build",
        action="store_true",
        help="llama.cpp: build it from the pinned sdist's source with the harness's instrumentation compiled in (the "
        "default llama.cpp subject), plus each --patch; cached by the hash of its patches",
    )
    parser.add_argument(
        "--patch",
        action="append",
        default=[],
        metavar="FILE",
        help="with --build: a change of your own to llama.cpp's source (a diff relative to its tree, as git diff "
        "writes it), applied after the instrumentation (repeat it); run it with mtp-harness run --engine-patch FILE",
    )
    parser.add_argument(
        "--fixes",
        default=NO_FIXES,
        metavar="none|all|SLUG[,SLUG...]",
        help="with --build: the documented fixes of these findings built in (what mtp-harness run --engine-fixes runs)",
    )
    parser.add_argument(
        "--flavour",
        choices=["cpu", "cuda"],
        default=None,
        help="default: the engine's only flavour (llama.cpp: cpu), else cuda when this machine has a CUDA GPU",
    )


def main(args: argparse.Namespace) -> int:
    from harness.subjects.engines.environments import EngineEnvironmentError, default_flavour, install, remove
    from harness.subjects.engines.registry import engine_named

    if args.action == "list":
        return engine_list()
    try:
        if args.name is None:
            raise HarnessError(f"`engine {args.action}` needs an engine name (vllm, llama.cpp, transformers)")
        record = engine_named(args.name)
        environment = record.environment
        flavour = args.flavour or default_flavour(environment)
        environment.flavour(flavour, args.version)  # a version that is no release number stops here
        own = environment.flavour(flavour).version
        if record.ability(PinnedInProcess) and args.action == "install" and args.version in (None, own):
            raise HarnessError(
                f"{record.name} {own} is the harness's own and runs in its process; "
                f"install another release with --version"
            )
    except HarnessError as error:
        print(f"mtp-harness engine: {error}", file=sys.stderr)
        return USAGE_ERROR
    if (args.patch or args.fixes != NO_FIXES) and not args.build:
        print("mtp-harness engine: --patch and --fixes go with --build", file=sys.stderr)
        return USAGE_ERROR
    if args.build and args.version is not None:
        print("mtp-harness engine: --build builds the pinned release's source, not --version", file=sys.stderr)
        return USAGE_ERROR
    try:
        if args.build:
            return engine_build(record, args)
        if args.action == "install":
            log = lambda line: print(f"mtp-harness engine: {line}", flush=True)  # noqa: E731
            install(environment, flavour, log=log, version=args.version)
            return 0
        if args.action == "remove":
            if args.version is None:
                raise EngineEnvironmentError("`engine remove` needs --version (what `engine list` shows)")
            print(f"mtp-harness engine: removed {remove(environment, flavour, args.version)}")
            return 0
        home = environment.home(environment.flavour(flavour, args.version))
        version = environment.installed_version(flavour, args.version)
        print(f"{environment.name} {flavour}: {version or 'not installed'} ({home})")
        return 0 if version else 1
    except EngineEnvironmentError as error:
        print(f"mtp-harness engine: {error}", file=sys.stderr)
        return 1


def engine_list() -> int:
    """`engine list`: every installed engine environment, its release, size and install time."""
    from harness.subjects.engines.environments import directory_size, engines_root, installed_environments

    found = installed_environments()
    if not found:
        print(f"no engine environment installed under {engines_root()}")
        return 0
    print(f"{'engine':10} {'flavour':7} {'version':15} {'from':26} {'size':>9} {'install':>7}  where")
    for info in found:
        size = info.get("size_bytes") or directory_size(Path(info["home"]))  # measured now for older installs
        seconds = f"{info['install_seconds']:.0f} s" if "install_seconds" in info else "?"
        origin = f"source, build {info['build']['key']}" if "build" in info else "its wheel"
        print(
            f"{info['engine']:10} {info['flavour']:7} {info['version']:15} {origin:26} {size / 2**30:>5.2f} GiB "
            f"{seconds:>7}  {info['home']}"
        )
    return 0


def engine_build(record: Engine, args: argparse.Namespace) -> int:
    """`engine install NAME --build [--patch FILE]...`: the engine built from its source (llama.cpp) unless that build
    exists; `engine status NAME --build`: whether it does."""
    build = record.ability(SourceBuild)
    if build is None:
        print(f"mtp-harness engine: {record.name} is installed from its wheel; it has no build from source")
        return USAGE_ERROR
    from harness.door.checks import fixes_named

    patches = tuple(str(Path(patch).resolve()) for patch in args.patch)
    try:
        fixes = fixes_named(args.fixes, record, build.runner) if args.fixes != NO_FIXES else ()
    except HarnessError as error:
        print(f"mtp-harness engine: --fixes {args.fixes}: {error}", file=sys.stderr)
        return USAGE_ERROR
    options = EngineOptions(runner=build.runner, fixes=fixes, patches=patches)
    if args.action == "install":
        build.make(options, lambda line: print(f"mtp-harness engine: {line}", flush=True))
        return 0
    built = build.record(options)
    what = f"{record.name} from source with {len(fixes)} fix(es) and {len(patches)} patch(es) of yours"
    if built is None:
        asked = "".join([f" --fixes {args.fixes}" if fixes else "", *(f" --patch {p}" for p in patches)])
        print(f"{what}: not built (mtp-harness engine install {record.name} --build{asked})")
        return 1
    print(f"{what}: build {built['build']['key']}, built {built['built_at']} in {built['install_seconds']} s")
    return 0
