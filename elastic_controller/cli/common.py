"""What every subcommand shares: the ``--config`` and ``--kubeconfig`` flags, loading the config (a
bad one exits 2 listing every bad path), and how a command gives up (``fail``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from ..policy.settings import ElasticConfig


class CommandExit(Exception):
    """Raised by a subcommand to stop with ``code``; ``volcano-elastic`` prints ``message`` to stderr."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def fail(command: str, message: str, code: int = 2) -> NoReturn:
    """Stop ``volcano-elastic COMMAND`` with ``code`` (2: bad input), saying why on stderr."""
    raise CommandExit(code, f"volcano-elastic {command}: {message}")


def add_config_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup, purpose: str = "defaults when absent",
                    metavar: str | None = None) -> None:
    parser.add_argument("--config", metavar=metavar, help=f"ElasticConfig YAML ({purpose})")


def add_kubeconfig_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")


def load_config_or_exit(args: argparse.Namespace, command: str) -> ElasticConfig:
    """The ElasticConfig of ``--config`` (defaults without it); exit 2 with every bad path listed."""
    from ..config import ConfigError, load_config_file

    try:
        return load_config_file(args.config)
    except ConfigError as exc:
        fail(command, str(exc))
