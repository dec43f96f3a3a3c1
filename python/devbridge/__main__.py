"""Command line: ``python -m devbridge check [--device NAME] [--plugin MODULE] [--json]``,
``python -m devbridge --version``."""

from __future__ import annotations

import argparse
import sys


def version_line() -> str:
    """devbridge's version and the torch and Triton it runs with here:
    "devbridge 0.1.0 (torch 2.13.0+cpu, triton 3.7.1)". Triton's version is
    its installed distribution's (importing Triton takes seconds)."""
    import importlib.metadata

    import torch

    import devbridge

    try:
        triton = "triton " + importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        triton = "no triton"
    return f"devbridge {devbridge.__version__} (torch {torch.__version__}, {triton})"


class _Version(argparse.Action):
    # argparse's own "version" action takes its text when the parser is built;
    # this one imports torch only when --version is given.
    def __call__(self, parser, namespace, values, option_string=None):
        print(version_line())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="devbridge",
        description="devbridge: Triton and DLPack/TVM-FFI kernels on PyTorch PrivateUse1 plugins.",
    )
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print devbridge's version and the torch and Triton it runs with, and exit")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check",
        help="conformance report for the PrivateUse1 backend in this process",
        description=(
            "Check every capability devbridge relies on in the PrivateUse1 backend "
            "(autoloaded, or imported with --plugin; default: the simdev reference "
            "plugin), measure the hot calls, and print the fix for each failure."
        ),
    )
    check.add_argument("--device", metavar="NAME",
                       help="expected backend name (e.g. simdev, cudadev); fails if the "
                            "loaded backend has another name")
    check.add_argument("--plugin", metavar="MODULE",
                       help="import this module to load the backend (when it is not autoloaded)")
    check.add_argument("--json", action="store_true", help="print a JSON report")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "check":
        from devbridge.check import run_check_command

        return run_check_command(device=args.device, plugin=args.plugin, as_json=args.json)
    return 2  # unreachable: argparse requires a command


if __name__ == "__main__":
    sys.exit(main())
