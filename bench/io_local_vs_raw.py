#!/usr/bin/env python3
"""PnetCDF beside raw MPI-IO of the same bytes: what the netCDF format costs (issue 12).

For each process count and size, `clustertune io netcdf`'s measurement (the level's own
code: ct-io-netcdf, every netCDF file checked) writes and reads the N^3-int array three
ways in one launch: netcdf (PnetCDF, collective by default), raw (MPI_File_write_at_all /
read_at_all of the same bytes at the same offsets) and rawswap (raw plus the 4-byte
big-endian swap netCDF needs on x86, what PnetCDF does in place). --repeat rounds; the
variants' order is reversed every other round (so neither side always runs first) and the
process counts interleave. Inside a launch the variants' repetitions interleave too
(repetition r runs them in order, r+1 reversed), so each netCDF repetition has raw ones
beside it under the same load; --warmup untimed repetitions come first (the first
repetitions of a launch pay for a cold start), then --reps timed ones. A launch gives each
variant's minimum and median of the open-to-close time; the bench prints, per (np, N, op),
the best (minimum over rounds) and the median (over rounds of the launches' medians) of each
variant, and the ratios netcdf/rawswap and netcdf/raw: best/best, the median of the rounds'
ratios of medians, and their spread (lowest..highest round). On a loaded 2-core machine a
2-rank 64 MiB write's repetitions spread 2-6x, so the minimum of a launch swings by +-25 %
between launches while the median of interleaved repetitions holds: read the medians.

Target (issue 12): a netCDF collective write takes at most 1.2x the time of raw MPI-IO plus
byte swap of the same bytes, for sizes >= 8 MB. The machine is shared: the load average is
printed with the result.

Usage (this host):       bench/io_local_vs_raw.py [--sizes 64,128,256] [--np 1,2,4]
                                                  [--repeat 5] [--reps 10] [--json out.json]
       Takes 243 s at load 7 with the defaults (476 s at load 11-14); the np=2 target cells:
       --sizes 128,256 --np 2 --repeat 3 (63 s at load 9).
       (virtual cluster): bench/io_local_vs_raw.py --vcluster 2   (root; ranks on 2 hosts)
       (a cluster):       bench/io_local_vs_raw.py --cluster NAME --dir DIR-EVERY-HOST-SEES
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clustertune import vcluster  # noqa: E402
from clustertune.cluster import local_cluster  # noqa: E402
from clustertune.levels.io import netcdf  # noqa: E402
from clustertune.results import Store  # noqa: E402
from clustertune.sources import resolve_cluster  # noqa: E402
from clustertune.units import parse_rate  # noqa: E402

TARGET = 1.2  # netCDF collective write / raw MPI-IO + swap, from 8 MB
TARGET_BYTES = 8e6


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def summary(t: dict) -> dict:
    """Best: the fastest repetition of all rounds; median: over the launches' medians."""
    return {"best": min(t["mins"]), "median": statistics.median(t["medians"]), **t}


def ratio_row(num: dict, den: dict) -> dict:
    """Ratios of two variants measured in the same rounds: best/best, and the median and
    spread of the rounds' ratios of their medians."""
    per_round = [a / b for a, b in zip(num["medians"], den["medians"], strict=True)]
    return {
        "best": min(num["mins"]) / min(den["mins"]),
        "median": statistics.median(per_round),
        "low": min(per_round),
        "high": max(per_round),
    }


def measure_all(cluster, store, args, sizes, nps, hosts) -> dict:
    times: dict[tuple, dict[str, list[float]]] = {}
    order = list(netcdf.VARIANTS)
    for k in range(args.repeat):
        variants = order if k % 2 == 0 else order[::-1]
        for np_ in nps if k % 2 == 0 else nps[::-1]:
            record = netcdf.measure(
                cluster,
                store,
                np=np_,
                mpi="openmpi",
                sizes=sizes,
                mode=args.mode,
                ops=["write", "read"],
                fmt=args.format,
                reps=args.reps,
                variants=variants,
                hosts=hosts,
                directory=args.dir,
                driver=args.driver,
                warmup=args.warmup,
            )
            if record["status"] != "ok":
                raise SystemExit(f"np={np_} round {k + 1}: {record['error']}")
            for r in netcdf.results(record):
                t = times.setdefault(
                    (np_, r["size"], r["op"], r["variant"]), {"mins": [], "medians": [], "cpu": []}
                )
                t["mins"].append(r["open_to_close_s_min"])
                t["medians"].append(r["open_to_close_s_median"])
                t["cpu"].append(r["cpu_s_median"])
            print(
                f"  round {k + 1}/{args.repeat} np={np_} ({','.join(variants)}) done, "
                f"load {load()}",
                file=sys.stderr,
                flush=True,
            )
    return times


def table(times: dict, sizes: list[int], nps: list[int]) -> list[dict]:
    rows = []
    for np_ in nps:
        for n in sizes:
            for op in ("write", "read"):
                t = {v: times[(np_, n, op, v)] for v in netcdf.VARIANTS}
                row = {"np": np_, "size": n, "op": op, "bytes": 4 * n**3}
                row.update({v: summary(t[v]) for v in netcdf.VARIANTS})
                row["netcdf_over_rawswap"] = ratio_row(t["netcdf"], t["rawswap"])
                row["netcdf_over_raw"] = ratio_row(t["netcdf"], t["raw"])
                row["overhead_ms"] = 1e3 * (row["netcdf"]["best"] - row["rawswap"]["best"])
                row["cpu_netcdf_over_rawswap"] = statistics.median(
                    a / b for a, b in zip(t["netcdf"]["cpu"], t["rawswap"]["cpu"], strict=True)
                )
                if op == "write" and row["bytes"] >= TARGET_BYTES:
                    r = row["netcdf_over_rawswap"]
                    row["target_met"] = {
                        "best": r["best"] <= TARGET,
                        "median": r["median"] <= TARGET,
                    }
                rows.append(row)
    return rows


def render(rows: list[dict], args, where: str, loads: tuple[str, str]) -> str:
    def ms(s: dict) -> str:
        return f"{1e3 * s['best']:8.2f} {1e3 * s['median']:8.2f}"

    def ratio(r: dict) -> str:
        return f"{r['best']:5.2f} {r['median']:5.2f} {r['low']:5.2f}..{r['high']:<5.2f}"

    lines = [
        f"PnetCDF ({args.mode}, {args.format}) vs raw MPI-IO of the same bytes on {where}; "
        f"driver {args.driver}; {args.repeat} rounds x {args.reps} interleaved reps (after "
        f"{args.warmup} untimed), open-to-close",
        f"load average before: {loads[0]}   after: {loads[1]}",
        "",
        f"{'np':>2} {'N':>4} {'MiB':>6} {'op':<5} | {'netcdf ms':^17} | {'rawswap ms':^17} | "
        f"{'raw ms':^17} | {'netcdf/rawswap':^23} | {'netcdf/raw':^23} | {'cpu':^5} | target",
        f"{'':>2} {'':>4} {'':>6} {'':<5} | {'best':>8} {'median':>8} | {'best':>8} {'median':>8} | "
        f"{'best':>8} {'median':>8} | {'best':>5} {'med':>5} {'spread':^11} | "
        f"{'best':>5} {'med':>5} {'spread':^11} | {'med':>5} |",
    ]
    for r in rows:
        verdict = ""
        if "target_met" in r:
            met = r["target_met"]
            verdict = (
                f"<= {TARGET}: best {'yes' if met['best'] else 'NO'}, "
                f"median {'yes' if met['median'] else 'NO'}"
            )
        lines.append(
            f"{r['np']:>2} {r['size']:>4} {r['bytes'] / 2**20:>6.2f} {r['op']:<5} | "
            f"{ms(r['netcdf'])} | {ms(r['rawswap'])} | {ms(r['raw'])} | "
            f"{ratio(r['netcdf_over_rawswap'])} | {ratio(r['netcdf_over_raw'])} | "
            f"{r['cpu_netcdf_over_rawswap']:5.2f} | {verdict}"
        )
    lines.append("")
    lines.append(
        "cpu: netcdf/rawswap of the CPU time (user + system, all ranks) of a repetition, "
        "median over rounds of the launches' medians: the work, without the wait for "
        "a CPU that the wall times carry on a loaded machine"
    )
    lines.append(
        "netCDF's own cost beyond raw + swap (best netcdf - best rawswap, ms): "
        + ", ".join(f"np={r['np']} N={r['size']} {r['op']} {r['overhead_ms']:+.2f}" for r in rows)
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64,128,256", help="array orders N (N^3 ints)")
    ap.add_argument("--np", default="1,2,4", help="process counts")
    ap.add_argument("--repeat", type=int, default=5, help="rounds (order alternates)")
    ap.add_argument("--reps", type=int, default=10, help="repetitions per launch (min)")
    ap.add_argument(
        "--warmup", type=int, default=2, help="untimed repetitions before each variant's timed ones"
    )
    ap.add_argument("--mode", choices=("collective", "independent"), default="collective")
    ap.add_argument("--format", choices=netcdf.FORMATS, default="cdf1")
    ap.add_argument("--driver", choices=tuple(netcdf.DRIVERS), default="romio")
    ap.add_argument("--cluster", help="a cluster file or virtual cluster name (default: this host)")
    ap.add_argument(
        "--vcluster",
        type=int,
        metavar="HOSTS",
        help="build a virtual cluster of HOSTS hosts for the run (root)",
    )
    ap.add_argument("--link", default="10gbit", help="the virtual cluster's link")
    ap.add_argument("--dir", help="directory every host sees (default: a new one under /tmp)")
    ap.add_argument("--json", help="write the rows here")
    args = ap.parse_args(argv)
    sizes = netcdf.parse_sizes(args.sizes)
    nps = [int(x) for x in args.np.split(",")]
    if args.repeat < 1 or args.reps < 1 or not all(p >= 1 for p in nps):
        ap.error("--repeat, --reps and --np must be at least 1")
    name = None
    if args.vcluster:
        name = f"iolr{os.getpid() % 100000}"
        state = vcluster.plan(name, args.vcluster, parse_rate(args.link))
        vcluster.up(state)
        cluster = vcluster.cluster_from_state(state)
    else:
        cluster = resolve_cluster(args.cluster) if args.cluster else local_cluster()
    where = (
        f"cluster {cluster.name} ({len(cluster.hosts)} hosts)"
        if len(cluster.hosts) > 1
        else f"this host ({cluster.name})"
    )
    before = load()
    try:
        with tempfile.TemporaryDirectory(prefix="io-bench-") as tmp:
            store = Store(Path(tmp) / "bench.db")
            times = measure_all(cluster, store, args, sizes, nps, None)
    finally:
        if name:
            vcluster.down(name)
    rows = table(times, sizes, nps)
    print(render(rows, args, where, (before, load())))
    if args.json:
        doc = {
            "where": where,
            "load_before": before,
            "load_after": load(),
            "args": vars(args),
            "rows": rows,
        }
        Path(args.json).write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
