"""``volcano-elastic webhook``: serve the admission webhooks over TLS with gunicorn."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from elastic_controller.policy.settings import ElasticConfig

HELP = "serve the admission webhooks (mutate Pods, validate PyTorchJobs) over TLS"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tls-cert-file", required=True, metavar="F", help="serving certificate (PEM)")
    parser.add_argument("--tls-private-key-file", required=True, metavar="F", help="its private key (PEM)")
    parser.add_argument("--port", type=int, default=8443, help="HTTPS port (default: 8443)")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default: 0.0.0.0)")
    parser.add_argument("--config", metavar="F", help="ElasticConfig YAML (default: built-in defaults)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes (default: 2)")
    parser.add_argument("--threads", type=int, default=32,
                        help="pool threads per worker (default: 32), only for requests whose body is not read "
                             "beforehand (chunked, over 4 MiB); reviews are answered on the event loop")
    parser.add_argument("--max-connections", type=int, default=1000, metavar="N",
                        help="connections one worker holds, idle kept-alive ones included (default: 1000); "
                             "a new one past it closes the oldest idle one")
    parser.add_argument("--max-pending", type=int, default=256, metavar="N",
                        help="connections per worker whose request has not arrived yet (default: 256); a new "
                             "one past it cuts the oldest that has waited 1 s or more")
    parser.add_argument("--max-client-pending", type=int, default=64, metavar="N",
                        help="the same per client address (default: 64): a client past it cuts its own oldest")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    parser.add_argument("--no-access-log", action="store_true", help="do not log every request")


def check(args: argparse.Namespace) -> tuple[ElasticConfig | None, list[str]]:
    """The loaded config and every problem with the command line, config and TLS files."""
    import ssl

    from elastic_controller.config import ConfigError, load_config_file

    from .tls import server_context

    problems: list[str] = []
    cfg = None
    if not 1 <= args.port <= 65535:
        problems.append(f"--port: must be 1..65535, got {args.port}")
    if args.workers < 1:
        problems.append(f"--workers: must be at least 1, got {args.workers}")
    if args.threads < 1:
        problems.append(f"--threads: must be at least 1, got {args.threads}")
    for flag in ("max_connections", "max_pending", "max_client_pending"):
        if getattr(args, flag) < 1:
            problems.append(f"--{flag.replace('_', '-')}: must be at least 1, got {getattr(args, flag)}")
    try:
        cfg = load_config_file(args.config)
    except ConfigError as exc:
        problems.extend(f"--config {exc.source}: {p}" for p in exc.problems)
    try:
        server_context(args.tls_cert_file, args.tls_private_key_file)
    except (OSError, ssl.SSLError) as exc:
        problems.append(f"--tls-cert-file/--tls-private-key-file: cannot load the pair: {exc}")
    return cfg, problems


def run(args: argparse.Namespace) -> int:
    import os
    import shutil
    import sys
    import tempfile

    cfg, problems = check(args)
    if problems:
        lines = "\n".join(f"  - {p}" for p in problems)
        print(f"volcano-elastic webhook: cannot start, {len(problems)} problem(s):\n{lines}", file=sys.stderr)
        return 2
    # Before any worker imports prometheus_client: every worker writes its metrics here.
    metrics_dir = tempfile.mkdtemp(prefix="volcano-elastic-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir

    from .server import ServeOptions, WebhookApplication, gunicorn_settings

    assert cfg is not None
    opts = ServeOptions(
        certfile=args.tls_cert_file,
        keyfile=args.tls_private_key_file,
        host=args.host,
        port=args.port,
        workers=args.workers,
        threads=args.threads,
        log_level=args.log_level,
        access_log=not args.no_access_log,
        max_connections=args.max_connections,
        max_pending=args.max_pending,
        max_client_pending=args.max_client_pending,
    )
    arbiter_pid = os.getpid()
    try:
        WebhookApplication(cfg, gunicorn_settings(opts)).run()
    finally:
        # gunicorn forks its workers inside run(): a worker that exits (SIGTERM alone, an abort after
        # a WORKER TIMEOUT) unwinds through this same frame. Only the arbiter, at its own exit, owns
        # the directory; a worker's exit is marked dead by the arbiter's child_exit hook. Deleting it
        # from a worker made every later review fail (issue 36, F1).
        if os.getpid() == arbiter_pid:
            shutil.rmtree(metrics_dir, ignore_errors=True)
    return 0
