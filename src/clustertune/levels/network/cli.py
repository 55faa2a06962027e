"""``clustertune net pingpong`` and ``clustertune net matrix``: argument handling only."""

from __future__ import annotations

import argparse
import os

from ...commands import Output, add_hosts, add_mpi, add_timeout, cluster_of, open_store
from ...runner import STARVED_LOAD_PER_CPU
from ...units import parse_size, parse_size_list
from . import LEVEL, matrix, matrix_output, pingpong, section
from .section import LIKE_FOR_LIKE


def cmd_pingpong(args: argparse.Namespace) -> Output:
    cluster = cluster_of(args)
    a, b = pingpong.parse_between(cluster, args.between)
    spec = pingpong.PingpongSpec(
        layer=args.layer,
        a=a,
        b=b,
        mode=args.mode,
        mpi=args.mpi,
        max_size=parse_size(args.max_size),
        nagle=args.nagle,
        timeout=args.timeout,
        wait=args.wait,
    )
    sockbufs = parse_size_list(args.sockbuf) if args.sockbuf else None
    store = open_store(args)
    records = pingpong.run_pingpongs(cluster, store, spec, sockbufs)
    docs = [pingpong.run_json(r) for r in records]
    status = 0 if all(r["status"] == "ok" for r in records) else 1
    payload = docs[0] if len(docs) == 1 else {"sockbuf_sweep": True, "runs": docs}
    text = "\n".join(pingpong.run_text(r) for r in records)
    if spec.layer in LIKE_FOR_LIKE:  # one MPI run (--sockbuf is TCP's)
        over_tcp = _over_tcp(cluster, store, spec, records[0])
        if over_tcp:
            payload["over_tcp"] = over_tcp
            text += "".join(f"\n{pingpong.run_text(r)}" for r in over_tcp.pop("retest"))
            text += f"\n  over {LIKE_FOR_LIKE[spec.layer]:<12}{over_tcp['summary']}"
            text += "".join(f"\n  FLAG: {f}" for f in over_tcp["flags"])
    return Output(payload, text, status)


def _starved(cluster) -> str | None:
    """Why an MPI run on this cluster cannot be judged now, or None."""
    load, cpus = os.getloadavg()[0], os.cpu_count() or 1
    if load <= STARVED_LOAD_PER_CPU * cpus:
        return None
    if not pingpong.shares_cpus(cluster, [h.name for h in cluster.hosts]):
        return None
    return (
        f"not judged: load {load:.1f} on the {cpus} CPUs its hosts share (above "
        f"{STARVED_LOAD_PER_CPU:g} per CPU a busy-polling MPI is starved); run again on a "
        "quieter machine"
    )


def _over_tcp(cluster, store, spec, record: dict) -> dict | None:
    """The MPI run against its like-for-like TCP baseline. Out of line, the sweep is run
    once more and both are read at their best before anyone is blamed: a loaded machine
    slows one run, a misconfiguration every run. On a machine too loaded to tell, the
    flags are withheld and the summary says why."""
    runs = [record]
    check = section.overhead_check(runs, store.list(LEVEL.name))
    starved = _starved(cluster) if check and check[1] else None
    if check and check[1] and not starved:
        runs.append(pingpong.run_pingpong(cluster, store, spec))
        check = section.overhead_check(runs, store.list(LEVEL.name))
    if not check:
        return None
    summary, flags = check
    if starved:
        summary, flags = f"{summary}; {starved}", []
    return {"summary": summary, "flags": flags, "runs": [r["id"] for r in runs], "retest": runs[1:]}


def cmd_matrix(args: argparse.Namespace) -> Output:
    record = matrix.run_matrix(
        cluster_of(args),
        open_store(args),
        layer=args.layer,
        mpi=args.mpi,
        size=parse_size(args.size),
        hosts=args.hosts,
        timeout=args.timeout,
    )
    return Output(
        matrix_output.matrix_json(record),
        matrix_output.matrix_text(record),
        0 if record["status"] == "ok" else 1,
    )


def add_commands(sub, common) -> None:
    net = sub.add_parser("net", help="network and message-passing levels: ping-pong, all pairs")
    net_sub = net.add_subparsers(dest="action", required=True, metavar="ACTION")

    p = net_sub.add_parser(
        "pingpong", parents=[common], help="message-size sweep between two hosts (TCP, MPI)"
    )
    p.add_argument("--layer", choices=pingpong.LAYERS, default="tcp")
    p.add_argument(
        "--mode",
        choices=pingpong.MODES,
        default="pingpong",
        help="tcp: pingpong, stream, bidir; mpi: pingpong (blocking), nonblocking, bidir",
    )
    p.add_argument(
        "--between",
        metavar="HOST,HOST",
        help="client/rank-0 host, then server/rank-1 host (default: the first two)",
    )
    add_mpi(p)
    p.add_argument(
        "--sockbuf",
        metavar="SIZES",
        help="TCP socket buffer size(s), e.g. 64K or 4K,8K,...,256K (one run each)",
    )
    p.add_argument("--max-size", default="8M", help="largest message (default 8M)")
    p.add_argument("--nagle", action="store_true", help="leave Nagle's algorithm on (TCP)")
    p.add_argument(
        "--wait",
        choices=pingpong.WAITS,
        default="block",
        help="tcp: block in recv (default, as NetPIPE) or busy-poll (as MPI libraries)",
    )
    add_timeout(p, None)
    p.set_defaults(func=cmd_pingpong)

    p = net_sub.add_parser(
        "matrix", parents=[common], help="every host pair: latency and bandwidth, diagnosis"
    )
    p.add_argument("--layer", choices=("tcp", "mpi"), default="tcp")
    add_mpi(p)
    p.add_argument("--size", default="1M", help="bandwidth message size (default 1M)")
    add_hosts(p, "hosts to pair")
    add_timeout(p, None)
    p.set_defaults(func=cmd_matrix)
