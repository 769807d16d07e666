"""``volcano-elastic``: one entry point, one module per subcommand.

Each subcommand module exposes ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` and keeps heavy imports inside ``run`` so that ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

from . import __version__

SUBCOMMANDS: dict[str, str] = {
    "webhook": "webhook.serve",
    "controller": "elastic_controller.main",
    "plan": "elastic_controller.plancmd",
    "status": "elastic_controller.statuscmd",
    "release-gates": "elastic_controller.releasecmd",
    "certs": "certs.cli",
    "simulate": "elastic_controller.simulate.cli",
}


def _load(module: str) -> ModuleType | None:
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        if exc.name and module.startswith(exc.name):
            return None
        raise


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="volcano-elastic",
        description="Elastic PyTorchJobs on the Volcano scheduler: admission webhook, controller, "
        "preemption agent, planner and simulator.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subs = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, module_name in SUBCOMMANDS.items():
        module = _load(module_name)
        if module is None:
            continue
        sub = subs.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(sub)
        sub.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return int(args._run(args))
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
