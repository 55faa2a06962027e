"""``clustertune io serve`` and ``clustertune io ca ...``."""

from __future__ import annotations

import argparse
from pathlib import Path

from ... import security
from ...commands import Output, cluster_of
from ...errors import UserError
from ...units import parse_size
from . import remote


def ca_dir_of(args: argparse.Namespace) -> Path:
    return Path(args.ca_dir) if args.ca_dir else security.default_dir()


def session_memory(text: str | None) -> int | None:
    """--max-session-memory's bytes (None: the server's default); 0 is refused here, before
    a server starts."""
    if text is None:
        return None
    if (size := parse_size(text)) <= 0:
        raise UserError(f"--max-session-memory {text!r}: a byte count above 0")
    return size


def cmd_serve(args: argparse.Namespace) -> Output:
    if args.np < 1:
        raise UserError(f"--np {args.np}: must be at least 1")
    if not 0 <= args.port < 65536:
        raise UserError(f"--port {args.port}: 0 (any) to 65535")
    cluster = cluster_of(args)
    host = args.host or cluster.hosts[0].name
    status = remote.serve(
        cluster,
        host,
        np=args.np,
        export=Path(args.export),
        ca_dir=ca_dir_of(args),
        port=args.port,
        sessions=args.sessions,
        idle_timeout=args.idle_timeout,
        lifetime=args.lifetime,
        driver=args.driver,
        handshake_timeout=args.handshake_timeout,
        round_bytes=None if args.round is None else parse_size(args.round),
        max_session_memory=session_memory(args.max_session_memory),
    )
    return Output({"host": host, "status": status}, f"ct-io-server on {host} ended", status)


def cmd_ca(args: argparse.Namespace) -> Output:
    directory = ca_dir_of(args)
    if args.ca_command == "init":
        cert = security.init_ca(directory)
        return Output({"ca": str(cert)}, f"CA {security.CA_SUBJECT}: {cert}")
    if args.ca_command == "issue":
        creds = security.issue(
            directory, args.name, server=args.server, hosts=tuple(args.host or ())
        )
        subject = security.dn_of(args.name, args.server)
        return Output(
            {"cert": str(creds.cert), "key": str(creds.key), "subject": subject},
            f"{subject}: {creds.cert} (key {creds.key})",
        )
    if args.ca_command == "grant":
        subject = args.name if "=" in args.name else security.dn_of(args.name)
        path = security.grant(directory, subject, args.area, args.right)
        return Output(
            {"gridmap": str(path), "subject": subject, "area": args.area, "right": args.right},
            f'{path}: "{subject}" {args.area} {args.right}',
        )
    if args.ca_command == "revoke":
        crl = security.revoke(directory, args.name)
        return Output(
            {"revoked": args.name, "crl": str(crl)},
            f"{args.name} revoked: {crl} (a running ct-io-server re-reads it)",
        )
    entries = security.gridmap_entries(directory / security.GRIDMAP)
    certs = sorted(p.stem for p in directory.glob("*.pem") if p.stem != "ca")
    lines = [f"CA directory {directory}", "certificates: " + (", ".join(certs) or "none")]
    lines += [f'  "{s}" {a} {r}' for s, (a, r) in entries.items()]
    return Output({"certificates": certs, "gridmap": entries}, "\n".join(lines))
