"""What every subcommand shares: the ``--config``, ``--kubeconfig``/``--context`` and ``-o`` flags,
loading the config (a bad one exits 2 listing every bad path), printing versioned JSON/YAML, sorting
names as people do, and how a command gives up (``fail``: one prefix, ``volcano-elastic COMMAND: ``,
for every command). Connecting to a cluster is in ``connect.py`` (``plan`` never talks to one)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from ..policy.settings import ElasticConfig

# The version of the JSON/YAML documents that `plan`, `status` and `queues` print: a tool reading
# them checks ``apiVersion`` and ``kind``; a field is only ever added within one version.
API_VERSION = "volcano-elastic.io/v1"
OUTPUT_FORMATS = ("table", "wide", "json", "yaml")


class CommandExit(Exception):
    """Raised by a subcommand to stop with ``code``; ``volcano-elastic`` prints ``message`` to stderr."""

    def __init__(self, code: int, message: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def fail(command: str, message: str, code: int = 2) -> NoReturn:
    """Stop ``volcano-elastic COMMAND`` with ``code`` (2: bad input, 1: the cluster said no), saying why
    on stderr after the one prefix every command uses."""
    raise CommandExit(code, f"volcano-elastic {command}: {message}")


def warn(command: str, message: str) -> None:
    """A warning on stderr, with the same prefix as errors."""
    print(f"volcano-elastic {command}: warning: {message}", file=sys.stderr)


def add_config_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup, purpose: str = "defaults when absent",
                    metavar: str | None = None) -> None:
    parser.add_argument("--config", metavar=metavar, help=f"ElasticConfig YAML ({purpose})")


def add_kubeconfig_flag(parser: argparse.ArgumentParser | argparse._ArgumentGroup, context: bool = False) -> None:
    """``--kubeconfig``, and ``--context`` for the commands people run (``connect`` uses both)."""
    parser.add_argument("--kubeconfig", help="kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
    if context:
        parser.add_argument("--context", help="the kubeconfig context to use (default: its current-context)")


def add_output_flag(parser: argparse.ArgumentParser, wide: str) -> None:
    parser.add_argument("-o", "--output", choices=OUTPUT_FORMATS, default="table",
                        help=f"table for people (default); wide: {wide}; json or yaml for tools (versioned: "
                             f"apiVersion {API_VERSION}, kind)")


def load_config_or_exit(args: argparse.Namespace, command: str) -> ElasticConfig:
    """The ElasticConfig of ``--config`` (defaults without it); exit 2 with every bad path listed."""
    from ..config import ConfigError, load_config_file

    try:
        return load_config_file(args.config)
    except ConfigError as exc:
        fail(command, str(exc))


def document(kind: str, body: Mapping[str, Any]) -> dict[str, Any]:
    """A versioned output document: ``apiVersion``, ``kind``, then ``body``."""
    return {"apiVersion": API_VERSION, "kind": kind, **body}


def print_document(kind: str, body: Mapping[str, Any], output: str) -> None:
    """The versioned document of ``kind`` (``document``) as ``json`` or ``yaml`` on stdout."""
    doc = document(kind, body)
    if output == "yaml":
        import yaml

        sys.stdout.write(yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1 << 16))
    else:
        print(json.dumps(doc, indent=2))


_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str) -> tuple[Any, ...]:
    """Sort key that orders names as people do: ``worker-2`` before ``worker-10``; ``ns/name`` by
    namespace first (``ns/b`` before ``ns2/a``)."""
    return tuple(tuple(int(p) if p.isdigit() else p for p in _DIGITS.split(part)) for part in name.split("/"))


def natural_sorted(names: Any) -> list[str]:
    return sorted(names, key=natural_key)


def table(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    """Columns padded to their widest cell; the first row is the header."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
