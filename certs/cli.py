"""``volcano-elastic certs {generate,inject-ca}``."""

from __future__ import annotations

import argparse

HELP = "generate the webhook's CA and serving certificate; inject the CA bundle into webhook configs"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="certs_command", metavar="ACTION", required=True)
    gen = actions.add_parser(
        "generate",
        help="write ca.crt, ca.key, tls.crt, tls.key to DIR (an existing CA there is reused: "
        "only the serving certificate is renewed)",
    )
    gen.add_argument("--service", required=True, help="the webhook Service's name")
    gen.add_argument("--namespace", required=True, help="the webhook Service's namespace")
    gen.add_argument("--out", required=True, metavar="DIR", help="output directory")
    gen.add_argument("--ip", action="append", default=[], metavar="ADDR",
                     help="an IP address SAN (repeatable), e.g. for a webhook reached by URL")
    gen.add_argument("--days", type=int, default=365, help="serving certificate validity (default: 365)")
    inj = actions.add_parser(
        "inject-ca",
        help="set caBundle on every webhook of the Mutating/ValidatingWebhookConfigurations in FILE "
        "(printed to stdout, or rewritten with --in-place)",
    )
    inj.add_argument("--ca", required=True, metavar="CA_CRT", help="the CA certificate (PEM)")
    inj.add_argument("file", metavar="FILE.yaml", help="multi-document YAML ('-' for stdin)")
    inj.add_argument("-i", "--in-place", action="store_true", help="rewrite FILE instead of printing")


def _generate(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from .generate import CertsError, generate

    try:
        result = generate(Path(args.out), args.service, args.namespace, args.ip, args.days)
    except (CertsError, OSError) as exc:
        print(f"volcano-elastic certs generate: {exc}", file=sys.stderr)
        return 2
    ca = "created a new CA" if result.created_ca else "reused the existing CA (caBundle unchanged)"
    sans = ", ".join(result.dns_names + result.ips)
    print(f"{result.out}: {ca}; serving certificate for {sans}, valid until {result.not_after:%Y-%m-%d}",
          file=sys.stderr)
    return 0


def _inject(args: argparse.Namespace) -> int:
    import sys
    from pathlib import Path

    from .generate import write_atomic
    from .inject import InjectError, ca_bundle, inject_text

    try:
        bundle = ca_bundle(Path(args.ca).read_bytes())
        text = sys.stdin.read() if args.file == "-" else Path(args.file).read_text(encoding="utf-8")
        output, count = inject_text(text, bundle, args.file)
        if args.in_place and args.file != "-":
            path = Path(args.file)
            write_atomic(path, output.encode(), path.stat().st_mode & 0o777)
        else:
            sys.stdout.write(output)
    except (InjectError, OSError, UnicodeDecodeError) as exc:
        print(f"volcano-elastic certs inject-ca: {exc}", file=sys.stderr)
        return 2
    print(f"caBundle set on {count} webhook(s)", file=sys.stderr)
    return 0


def run(args: argparse.Namespace) -> int:
    if args.certs_command == "generate":
        return _generate(args)
    return _inject(args)
