"""``volcano-elastic``: one entry point, one module per subcommand in this package (``webhook``: ``webhook/serve.py``).

Each subcommand module exposes ``HELP`` (one line), ``add_arguments(parser)`` and
``run(args) -> int`` and keeps heavy imports inside ``run`` so that ``--help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType

from .. import __version__
from .common import CommandExit

SUBCOMMANDS: dict[str, str] = {
    "webhook": "webhook.serve",  # the webhook is its own top-level package (the layout asked for)
    "controller": "elastic_controller.cli.controller",
    "plan": "elastic_controller.cli.plan",
    "status": "elastic_controller.cli.status",
    "queues": "elastic_controller.cli.queues",
    "release-gates": "elastic_controller.cli.release_gates",
    "certs": "elastic_controller.cli.certs",
    "simulate": "elastic_controller.cli.simulate",
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
        sub.set_defaults(_run=module.run, _parser=sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if extra:  # said with the subcommand's usage, not the top level's
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(extra)}")
    if not getattr(args, "_run", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        code = int(args._run(args))
        sys.stdout.flush()  # here, not at exit: a reader that went away is handled below
        return code
    except CommandExit as stop:
        if stop.message:
            print(stop.message, file=sys.stderr)
        return stop.code
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # `volcano-elastic plan ... | head -2`: the reader has gone, as with any Unix tool. Point stdout at
        # /dev/null so that the interpreter's final flush does not print a traceback; exit as SIGPIPE would.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 141


if __name__ == "__main__":
    sys.exit(main())
