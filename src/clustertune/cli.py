"""Command line: argument handling only; the work is done by the modules it calls.

Every command accepts --json and then prints exactly one JSON document on stdout;
progress and errors go to stderr. A user error exits 2 with one line, no traceback; a run
that is not ok exits 1; SIGINT, SIGTERM or SIGHUP stop the job (launch/process.py), store
the run as interrupted and exit 128 + the signal's number. The commands themselves come
from the levels' manifests (clustertune.levels) and the shared options from
clustertune.commands.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import os
import signal
import sys
from pathlib import Path

from . import __version__, catalog, vcluster
from .commands import Output, common_parser, open_store, store_parser
from .errors import UserError
from .launch.process import signal_of, stop_on_signals
from .results import compare, flatten_for_csv
from .units import parse_rate

# --- vcluster ---------------------------------------------------------------------------


def _host_links(items: list[str]) -> tuple[dict[str, int | None], dict[str, dict]]:
    """--host-link items: nominal rates and faults per host (repeats of a host merge)."""
    links: dict[str, int | None] = {}
    faults: dict[str, dict] = {}
    for item in items:
        host, changes = vcluster.parse_host_link(item)
        if "link_bps" in changes:
            links[host] = changes["link_bps"]
        faults.setdefault(host, {}).update(changes["faults"])
    return links, faults


def cmd_vcluster_up(args: argparse.Namespace) -> Output:
    link = parse_rate(args.link)
    wan = parse_rate(args.wan_link) if args.wan_link else None
    if args.sites > 1 and args.wan_link is None:
        raise UserError("--sites needs --wan-link RATE (the link between sites)")
    links, faults = _host_links(args.host_link)
    link_faults: dict[str, dict] = {}
    for item in args.link_fault:
        pair, changes = vcluster.parse_link_fault(item)
        link_faults.setdefault(pair, {}).update(changes)
    state = vcluster.plan(
        args.name,
        args.hosts,
        link,
        links,
        args.sites,
        wan,
        args.delay_us,
        args.cores,
        faults,
        args.wire,
        link_faults,
    )
    vcluster.require_root()
    state = vcluster.up(state)
    return Output(state, vcluster.describe(state))


def cmd_vcluster_down(args: argparse.Namespace) -> Output:
    removed = vcluster.down(args.name)
    text = f"{args.name}: removed" if removed else f"{args.name}: nothing to remove"
    return Output({"name": args.name, "removed": removed}, text)


def cmd_vcluster_set(args: argparse.Namespace) -> Output:
    if args.link:
        state, target = vcluster.set_link_faults(args.name, args.link, args.change)
    else:
        state = vcluster.set_faults(args.name, args.host, args.change)
        target = args.host
    faults = vcluster.cluster_from_state(state).extra["faults"].get(target, {})
    text = f"{args.name} {target}: faults {vcluster.format_faults(faults) or 'none'}"
    kind = "link" if args.link else "host"
    return Output({"name": args.name, kind: target, "faults": faults}, text)


def cmd_vcluster_status(args: argparse.Namespace) -> Output:
    clusters = vcluster.status()
    text = "\n".join(vcluster.describe(s) for s in clusters) or "no virtual cluster is up"
    return Output(clusters, text)


# --- results ----------------------------------------------------------------------------


def cmd_results_list(args: argparse.Namespace) -> Output:
    records = open_store(args).list(level=args.level, limit=args.limit)
    rows = [
        {k: r[k] for k in ("id", "started", "level", "kernel", "status", "verification")}
        | {"cluster": r["meta"]["cluster"]["name"]}
        for r in records
    ]
    text = "\n".join(
        f"{r['id']:>5}  {r['started']}  {r['level']:10} {r['kernel']:16} {r['cluster']:12} "
        f"{r['status']:10} {r['verification']}"
        for r in rows
    )
    return Output(rows, text or "no runs stored")


def cmd_results_show(args: argparse.Namespace) -> Output:
    record = open_store(args).get(args.id)
    return Output(record, json.dumps(record, indent=1))


def cmd_results_export(args: argparse.Namespace) -> Output:
    records = open_store(args).list(level=args.level)
    if args.format == "json":
        return Output(records, json.dumps(records, indent=1))
    rows = [flatten_for_csv(r) for r in records]
    columns = list(dict.fromkeys(k for row in rows for k in row))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return Output(rows, buffer.getvalue().rstrip("\n"))


def cmd_results_compare(args: argparse.Namespace) -> Output:
    store = open_store(args)
    diff = compare(store.get(args.a), store.get(args.b))
    lines = [
        f"run {r['id']}: {r['level']}/{r['kernel']} {r['status']}, verification {r['verification']}"
        for r in diff["runs"]
    ]
    if diff["no_ratio"]:
        lines.append(f"no ratios: {diff['no_ratio']}")
    lines.append(f"{'figure':28} {'run ' + str(args.a):>16} {'run ' + str(args.b):>16}  ratio")
    for name, row in diff["figures"].items():
        ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
        lines.append(f"{name:28} {row['a']!s:>16} {row['b']!s:>16}  {ratio}")
    return Output(diff, "\n".join(lines))


# --- report -----------------------------------------------------------------------------


def cmd_report(args: argparse.Namespace) -> Output:
    from . import report, summary

    if args.summary:  # the report's first screen, in the terminal; no file written
        store = open_store(args)
        rows = report.summary_rows(store, store.list())
        return Output({"summary": summary.as_json(rows)}, summary.text_table(rows))
    out = Path(args.out)
    if out.is_dir():  # checked before the report is built
        raise UserError(f"--out {out}: is a directory; name a file, e.g. {out / 'report.html'}")
    html = report.build(open_store(args))
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(html)
    except OSError as exc:
        raise UserError(
            f"--out {out}: cannot write the report: {exc.filename}: {exc.strerror}"
        ) from None
    return Output({"report": str(out.resolve())}, f"report written to {out.resolve()}")


# --- wiring -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    common, store = common_parser(), store_parser()
    parser = argparse.ArgumentParser(
        prog="clustertune", description="Evaluate, diagnose and tune clusters level by level."
    )
    parser.add_argument("--version", action="version", version=f"clustertune {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    vc = sub.add_parser("vcluster", help="virtual cluster of network namespaces on this machine")
    vc_sub = vc.add_subparsers(dest="action", required=True)
    p = vc_sub.add_parser("up", parents=[store], help="build a virtual cluster")
    p.add_argument("--name", required=True)
    p.add_argument("--hosts", type=int, required=True, help="number of hosts (host0..hostN-1)")
    p.add_argument(
        "--link", default="1gbit", help="link rate per host, e.g. 100mbit, 1gbit, unlimited"
    )
    p.add_argument(
        "--host-link",
        action="append",
        default=[],
        metavar="HOST=SPEC",
        help="one host's link: a nominal rate and/or faults, e.g. "
        "host2=1gbit,loss=0.1%%,delay=200us,jitter=50us,rate=100mbit,flap=300ms/5s "
        "(repeatable; docs/faults.md)",
    )
    p.add_argument(
        "--link-fault",
        action="append",
        default=[],
        metavar="A-B=SPEC",
        help="faults of the link between two hosts only, e.g. host1-host2=loss=0.1%%,delay=200us "
        f"(fields {', '.join(vcluster.LINK_FAULT_FIELDS)}; repeatable; docs/faults.md)",
    )
    p.add_argument("--sites", type=int, default=1, help="split the hosts into S sites")
    p.add_argument("--wan-link", help="rate of the link between sites")
    p.add_argument(
        "--delay-us",
        type=int,
        default=0,
        help="per-packet delay each way (held in the virtual switch)",
    )
    p.add_argument("--cores", type=int, default=1, help="nominal cores per virtual host")
    p.add_argument(
        "--wire",
        choices=vcluster.WIRES,
        default=vcluster.DEFAULT_WIRE,
        help=vcluster.WIRE_HELP,
    )
    p.set_defaults(func=cmd_vcluster_up)
    p = vc_sub.add_parser("down", parents=[store], help="remove a virtual cluster")
    p.add_argument("--name", required=True)
    p.set_defaults(func=cmd_vcluster_down)
    p = vc_sub.add_parser(
        "set", parents=[store], help="change one host's or link's faults on a running cluster"
    )
    p.add_argument("--name", required=True)
    target = p.add_mutually_exclusive_group(required=True)
    target.add_argument("--host", help="a host: every packet it sends")
    target.add_argument("--link", metavar="A-B", help="a pair of hosts: the packets between them")
    p.add_argument(
        "change",
        nargs="+",
        metavar="FIELD=VALUE|clear",
        help=f"fields {', '.join(vcluster.FAULT_FIELDS)} (a --link: "
        f"{', '.join(vcluster.LINK_FAULT_FIELDS)}); FIELD=off removes one, clear all",
    )
    p.set_defaults(func=cmd_vcluster_set)
    p = vc_sub.add_parser("status", parents=[store], help="list virtual clusters")
    p.set_defaults(func=cmd_vcluster_status)

    res = sub.add_parser("results", help="stored runs")
    res_sub = res.add_subparsers(dest="action", required=True)
    p = res_sub.add_parser("list", parents=[store])
    p.add_argument("--level")
    p.add_argument("--limit", type=int)
    p.set_defaults(func=cmd_results_list)
    p = res_sub.add_parser("show", parents=[store])
    p.add_argument("id", type=int)
    p.set_defaults(func=cmd_results_show)
    p = res_sub.add_parser("export", parents=[store])
    p.add_argument("--format", choices=("json", "csv"), default="json")
    p.add_argument("--level")
    p.set_defaults(func=cmd_results_export)
    p = res_sub.add_parser("compare", parents=[store])
    p.add_argument("a", type=int)
    p.add_argument("b", type=int)
    p.set_defaults(func=cmd_results_compare)

    p = sub.add_parser("report", parents=[store], help="write the HTML report")
    p.add_argument("--out", default="clustertune-report.html")
    p.add_argument(
        "--summary",
        action="store_true",
        help="print the report's summary table (the first screen) instead",
    )
    p.set_defaults(func=cmd_report)

    for level in catalog.all_levels():
        add_commands = level.part("commands")
        if add_commands is not None:
            add_commands(sub, common)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    stop_on_signals()
    try:
        out = args.func(args)
    except UserError as exc:
        if getattr(args, "json", False):
            print(json.dumps({"error": str(exc)}))
        print(f"clustertune: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # the job is stopped; the run, if any, stored
        signum = signal_of(exc)
        message = (
            f"interrupted ({signal.Signals(signum).name}); the job was stopped and "
            "what it measured stored as interrupted"
        )
        if getattr(args, "json", False):
            print(json.dumps({"error": message}))
        print(f"clustertune: {message}", file=sys.stderr)
        return 128 + signum
    try:
        print(json.dumps(out.payload) if args.json else out.text, flush=True)
    except BrokenPipeError:  # the reader (e.g. `| head`) left: not an error of this command
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no 2nd one at exit
    return out.status


if __name__ == "__main__":
    sys.exit(main())
