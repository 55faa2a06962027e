#!/usr/bin/env python3
"""Remote collective netCDF I/O across the WAN of a two-site virtual cluster (issue 12).

`vcluster up --sites 2 --wan-link 1gbit` (built here, 2 hosts per site, removed at the end):
the client job (ct-io-fwd) on site0's hosts writes and reads N^3 ints (default 256^3,
64 MiB) through ct-io-server (OpenMPI + PnetCDF) started on site1's first host for each run,
over mutual TLS: `clustertune io netcdf --remote site1`'s own measurement, files checked.

Cases (all in every round, their order reversed every other round):
  * the client built for OpenMPI and for MPICH (--mpi), --np client ranks (one server rank
    each);
  * the server's rounds (--server-round, default 4M: a put's round written while the next
    travels; 0: the whole block crosses the link first, then one PnetCDF call, as the
    paper's servers did).
Each launch gives min and median over --reps repetitions of the open-to-close time;
throughput = bytes / time, and its share of the nominal WAN rate. Printed per case: best
(fastest repetition of all rounds) and median (of the launches' medians), and the spread of
the launches' best. For scale, iperf3 over the same WAN (what TCP itself gets there).

Then the small sizes (--small 16, OpenMPI client): open-to-close of the batched protocol
(define calls pipelined, one session per job) beside the paper's forwarding (one round trip
per call, --no-batch; and a session per open/close, --session file): the small-size overhead
and what batching saves. --small-delay-us D rebuilds the cluster for them with D us of delay
on every host's egress, so that a round trip costs what a WAN's does.

Target (issue 12): >= 80 % of the link rate at 256^3. The machine is shared: the load
average is printed with the result.

Usage (root): bench/io_remote.py [--wan-link 1gbit] [--sizes 256] [--np 2] [--mpi openmpi,mpich]
                                 [--server-round 4M,0] [--repeat 3] [--reps 5] [--wire tbf|paced]
                                 [--json out.json]
The defaults take about 10 minutes at load ~10 (12 launches of 256^3 at ~37 s each, then
9 small ones).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clustertune import vcluster  # noqa: E402
from clustertune.launch.launchers import launcher_for  # noqa: E402
from clustertune.levels.io import netcdf  # noqa: E402
from clustertune.results import Store  # noqa: E402
from clustertune.units import parse_rate, parse_size  # noqa: E402

TARGET = 0.80  # of the nominal inter-site rate, at 256^3


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def iperf(cluster, client: str, server: str, reverse: bool, seconds: float = 3.0) -> float:
    """TCP goodput (bit/s) from client to server (reverse: server to client), iperf3."""
    launcher = launcher_for(cluster)
    address = cluster.host(server).address
    port = str(5300 + os.getpid() % 500)
    srv = subprocess.Popen(
        launcher.host_argv(server, ["iperf3", "-s", "-1", "-p", port]),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(50):
            time.sleep(0.1)
            out = subprocess.run(
                launcher.host_argv(
                    client,
                    ["iperf3", "-c", address, "-p", port, "-J", "-t", f"{seconds:g}"]
                    + ["-R"] * reverse,
                ),
                capture_output=True,
                text=True,
                timeout=seconds + 30,
            )
            if out.returncode == 0:
                return json.loads(out.stdout)["end"]["sum_received"]["bits_per_second"]
        raise RuntimeError(f"iperf3: {out.stderr or out.stdout}")
    finally:
        srv.kill()
        srv.wait()


def retransmitted(cluster) -> int:
    """TCP segments retransmitted so far, summed over the cluster's hosts (each its own
    network namespace, so /proc/net/snmp read there is that host's)."""
    launcher, total = launcher_for(cluster), 0
    for host in cluster.hosts:
        out = subprocess.run(
            launcher.host_argv(host.name, ["cat", "/proc/net/snmp"]),
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        names, values = [
            line.split()[1:] for line in out.stdout.splitlines() if line.startswith("Tcp:")
        ]
        total += int(values[names.index("RetransSegs")])
    return total


def run_case(cluster, store, site, case: dict, sizes, reps, ca_dir) -> dict | None:
    """{(size, op): result row, with the launch's TCP retransmissions}, or None (said on
    stderr) when the launch failed."""
    retrans = retransmitted(cluster)
    record = netcdf.measure(
        cluster,
        store,
        np=case["np"],
        mpi=case["mpi"],
        sizes=sizes,
        mode="collective",
        ops=["write", "read"],
        fmt="cdf1",
        reps=reps,
        remote=site,
        ca_dir=ca_dir,
        identity="bench",
        server_round=case.get("round"),
        batch=case.get("batch", True),
        session=case.get("session", "job"),
    )
    if record["status"] != "ok":
        print(f"  {label(case)}: run {record['id']} FAILED: {record['error']}", file=sys.stderr)
        return None
    retrans = retransmitted(cluster) - retrans
    return {(r["size"], r["op"]): r | {"retrans": retrans} for r in netcdf.results(record)}


def label(case: dict) -> str:
    parts = [f"{case['mpi']} client", f"np={case['np']}"]
    if "round" in case:
        r = case["round"]
        parts.append(f"rounds of {r / 2**20:g} MiB" if r else "store-and-forward")
    if not case.get("batch", True):
        parts.append("per-call")
    if case.get("session", "job") == "file":
        parts.append("session per file")
    return ", ".join(parts)


def rounds(cluster, store, site, cases, sizes, repeat, reps, ca_dir) -> list[list[dict]]:
    """results[case][round] = {(size, op): result row}"""
    out: list[list[dict]] = [[] for _ in cases]
    for k in range(repeat):
        order = list(range(len(cases)))
        for i in order if k % 2 == 0 else order[::-1]:
            out[i].append(run_case(cluster, store, site, cases[i], sizes, reps, ca_dir))
            print(
                f"  round {k + 1}/{repeat}: {label(cases[i])} done, load {load()}",
                file=sys.stderr,
                flush=True,
            )
    return out


def cells(cases, results, sizes):
    """(case, failed launches, size, op, that cell's figures of every launch that ran) for
    each case with a launch that ran, size and operation."""
    for case, all_runs in zip(cases, results, strict=True):
        runs = [run for run in all_runs if run is not None]
        if not runs:
            continue
        for n in sizes:
            for op in ("write", "read"):
                yield case, len(all_runs) - len(runs), n, op, [run[(n, op)] for run in runs]


def throughput_rows(cases, results, sizes, wan_bps) -> list[dict]:
    rows = []
    for case, failed, n, op, rs in cells(cases, results, sizes):
        nbytes = rs[0]["bytes"]
        best = min(r["open_to_close_s_min"] for r in rs)
        median = statistics.median(r["open_to_close_s_median"] for r in rs)
        io_best = min(r["io_only_s_min"] for r in rs)
        share = [8 * nbytes / r["open_to_close_s_min"] / wan_bps for r in rs]
        rows.append(
            {
                "case": label(case),
                **case,
                "size": n,
                "op": op,
                "bytes": nbytes,
                "failed_launches": failed,
                "best_s": best,
                "median_s": median,
                "io_only_best_s": io_best,
                "share_best": 8 * nbytes / best / wan_bps,
                "share_median": 8 * nbytes / median / wan_bps,
                "share_io_only_best": 8 * nbytes / io_best / wan_bps,
                "share_rounds": share,
                "retrans_per_launch": statistics.median(r["retrans"] for r in rs),
            }
        )
    return rows


def render_throughput(rows, wan: str, tcp: dict, args, wire: str) -> list[str]:
    lines = [
        f"Remote collective I/O across a {wan} WAN ({wire} wire; site0 clients -> site1 "
        f"server), {args.repeat} rounds x {args.reps} reps, open-to-close; share of the "
        "nominal link; retx: TCP segments retransmitted in a launch (all hosts, median)",
        f"iperf3 over the same WAN: site0->site1 {tcp['up'] / 1e6:.0f} Mbit/s "
        f"({tcp['up'] / tcp['wan']:.0%}), site1->site0 {tcp['down'] / 1e6:.0f} Mbit/s "
        f"({tcp['down'] / tcp['wan']:.0%})"
        if tcp
        else "iperf3: not run",
        "",
        f"{'case':<42} {'N':>4} {'op':<5} {'best ms':>8} {'median':>8} {'I/O ms':>8} "
        f"{'MB/s':>6} {'share best':>10} {'median':>7} {'I/O only':>8} {'retx':>6} {'rounds':<20} "
        "target",
    ]
    for r in rows:
        verdict = ""
        if r["size"] >= 256:
            verdict = (
                f">= {TARGET:.0%}: best {'yes' if r['share_best'] >= TARGET else 'NO'}, "
                f"median {'yes' if r['share_median'] >= TARGET else 'NO'}"
            )
        spread = "/".join(f"{s:.0%}" for s in r["share_rounds"])
        if r["failed_launches"]:
            verdict += f" ({r['failed_launches']} launch(es) failed)"
        lines.append(
            f"{r['case']:<42} {r['size']:>4} {r['op']:<5} {1e3 * r['best_s']:>8.1f} "
            f"{1e3 * r['median_s']:>8.1f} {1e3 * r['io_only_best_s']:>8.1f} "
            f"{r['bytes'] / r['best_s'] / 1e6:>6.1f} {r['share_best']:>10.0%} "
            f"{r['share_median']:>7.0%} {r['share_io_only_best']:>8.0%} "
            f"{r['retrans_per_launch']:>6.0f} {spread:<20} {verdict}"
        )
    return lines


def small_rows(cases, results, sizes) -> list[dict]:
    return [
        {
            "case": label(case),
            "size": n,
            "op": op,
            "best_s": min(r["open_to_close_s_min"] for r in rs),
            "median_s": statistics.median(r["open_to_close_s_median"] for r in rs),
        }
        for case, _, n, op, rs in cells(cases, results, sizes)
    ]


def render_small(rows, delay_us: int) -> list[str]:
    lines = [
        "",
        "Small sizes: open-to-close (ms), the batched protocol (define calls pipelined, "
        "a session per job) beside the paper's per-call forwarding; per-packet delay "
        f"{delay_us} us on every host's egress",
        f"{'case':<52} {'N':>4} {'op':<5} {'best':>8} {'median':>8}",
    ]
    base = {(r["size"], r["op"]): r for r in rows if "per-call" not in r["case"]}
    for r in rows:
        b = base.get((r["size"], r["op"]), r)
        extra = ""
        if r is not b:
            extra = (
                f"  {1e3 * (r['best_s'] - b['best_s']):+.2f} ms best, "
                f"{1e3 * (r['median_s'] - b['median_s']):+.2f} ms median beside "
                "batched"
            )
        lines.append(
            f"{r['case']:<52} {r['size']:>4} {r['op']:<5} {1e3 * r['best_s']:>8.2f} "
            f"{1e3 * r['median_s']:>8.2f}{extra}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--wan-link", default="1gbit")
    ap.add_argument("--link", default="10gbit", help="links inside a site")
    ap.add_argument("--sizes", default="256")
    ap.add_argument("--np", default="2", help="client ranks (one server rank each)")
    ap.add_argument("--mpi", default="openmpi,mpich", help="client builds")
    ap.add_argument("--server-round", default="4M,0", help="the server's rounds (0: whole)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument(
        "--small", default="16", help="small sizes for the batching comparison ('' to skip)"
    )
    ap.add_argument("--small-reps", type=int, default=10)
    ap.add_argument(
        "--small-delay-us",
        type=int,
        default=0,
        help="for the small sizes, a cluster of its own with this per-packet delay "
        "on every host's egress (a WAN's round trip)",
    )
    ap.add_argument("--no-iperf", action="store_true")
    ap.add_argument(
        "--wire",
        choices=vcluster.WIRES,
        help="the virtual cluster's link model (default: vcluster's)",
    )
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    wire = {"wire": args.wire} if args.wire else {}
    sizes = netcdf.parse_sizes(args.sizes)
    nps = [int(x) for x in args.np.split(",")]
    mpis = args.mpi.split(",")
    server_rounds = [parse_size(x) for x in args.server_round.split(",")]
    wan_bps = parse_rate(args.wan_link)
    if not wan_bps:
        ap.error("--wan-link: a finite rate")
    cases = [{"mpi": m, "np": p, "round": r} for m in mpis for p in nps for r in server_rounds]
    small_cases = [{"mpi": "openmpi", "np": nps[0]},
                   {"mpi": "openmpi", "np": nps[0], "batch": False},
                   {"mpi": "openmpi", "np": nps[0], "batch": False, "session": "file"}]  # fmt: skip
    name = f"iorm{os.getpid() % 100000}"
    state = vcluster.plan(name, 4, parse_rate(args.link), sites=2, wan_bps=wan_bps, **wire)
    before = load()
    vcluster.up(state)
    try:
        cluster = vcluster.cluster_from_state(state)
        site = cluster.sites[1].name
        client = next(h.name for h in cluster.hosts if h.site != site)
        server = next(h.name for h in cluster.hosts if h.site == site)
        tcp = {}
        if not args.no_iperf:
            tcp = {
                "wan": wan_bps,
                "up": iperf(cluster, client, server, False),
                "down": iperf(cluster, client, server, True),
            }
        with tempfile.TemporaryDirectory(prefix="io-remote-bench-") as tmp:
            store = Store(Path(tmp) / "bench.db")
            ca_dir = Path(tmp) / "ca"
            results = rounds(cluster, store, site, cases, sizes, args.repeat, args.reps, ca_dir)
            rows = throughput_rows(cases, results, sizes, wan_bps)
            small = []
            if args.small:
                ssizes = netcdf.parse_sizes(args.small)
                if args.small_delay_us:
                    vcluster.down(name)
                    state = vcluster.plan(
                        name,
                        4,
                        parse_rate(args.link),
                        sites=2,
                        wan_bps=wan_bps,
                        delay_us=args.small_delay_us,
                        **wire,
                    )
                    vcluster.up(state)
                    cluster = vcluster.cluster_from_state(state)
                sres = rounds(
                    cluster, store, site, small_cases, ssizes, args.repeat, args.small_reps, ca_dir
                )
                small = small_rows(small_cases, sres, ssizes)
    finally:
        vcluster.down(name)
    after = load()
    lines = render_throughput(rows, args.wan_link, tcp, args, state["wire"])
    if small:
        lines += render_small(small, args.small_delay_us)
    lines += ["", f"load average before: {before}   after: {after}"]
    print("\n".join(lines))
    if args.json:
        doc = {
            "load_before": before,
            "load_after": after,
            "args": vars(args),
            "iperf": tcp,
            "rows": rows,
            "small": small,
        }
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
