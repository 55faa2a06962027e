#!/usr/bin/env python3
"""seeds/000's comparison, within one site vs across sites, on virtual grids of two Slurm
sites (2 hosts each) joined by each --wan-links WAN: per MPI,

  * Linpack (ct-linpack, N x N, P x Q = 1 x 2, one rank per host) inside site0 with the
    plain launcher (host0, host1) vs across site0 and site1 through the grid stack
    (host0, host2: co-allocated Slurm allocations, ranks started by srun --jobid);
  * the MPI ping-pong (blocking and non-blocking, mpptest style) on the same two pairs:
    latency and bandwidth;
  * the grid's start-up: first allocation request to last grant (allocation_s).

Every case runs --repeat times, the two placements alternating in order; best and median
of each and the ratio across / within of the bests. The records go to a throw-away
store (clustertune grid compare stores them in the user's). The machine is shared: the
load average is printed with the result.

Usage (root): bench/grid_compare.py [--wan-links 100mbit,1gbit] [--mpi openmpi,mpich]
              [-N 3000] [--repeat 3] [--no-pingpong] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clustertune.grid import virtual  # noqa: E402
from clustertune.levels.grid import compare  # noqa: E402
from clustertune.results import Store  # noqa: E402
from clustertune.units import parse_rate  # noqa: E402

PLACES = (("within", "plain"), ("across", "grid"))


def value(record: dict, what: str) -> float | None:
    if record["status"] != "ok":
        raise SystemExit(f"run {record['id']} failed: {record['error']}")
    if what == "gflops":
        return max(s["gflops"] for s in record["samples"] if s.get("passed"))
    return record["figures"].get(what)


def best_of(what: str, values: list[float]) -> float:
    """The best of a figure: the highest rate, the lowest time."""
    return min(values) if what in ("latency_us", "allocation_s") else max(values)


def measure(
    name: str, store: Store, cases: list[tuple[str, compare.Case]], repeat: int, timeout: float
) -> dict[str, dict[str, list[float]]]:
    """{label: {figure: [values]}}; the cases of one label alternate their order."""
    state = virtual.load(name)
    out: dict[str, dict[str, list[float]]] = {}
    for i in range(repeat):
        for label, case in cases if i % 2 == 0 else cases[::-1]:
            record = compare.run_case(state, store, case, timeout)
            figures = ["gflops"] if case.kernel == "linpack" else ["latency_us", "bandwidth_mbps"]
            if case.path == "grid":
                figures.append("allocation_s")
            for what in figures:
                out.setdefault(label, {}).setdefault(what, []).append(value(record, what))
    return out


def report(figures: dict[str, list[float]]) -> dict:
    row = {}
    for what, values in figures.items():
        row[what] = {
            "best": best_of(what, values),
            "median": statistics.median(values),
            "values": [round(v, 3) for v in values],
        }
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wan-links", default="100mbit,1gbit")
    ap.add_argument("--mpi", default="openmpi,mpich")
    ap.add_argument("-N", type=int, default=3000)
    ap.add_argument("--nb", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-pingpong", action="store_true")
    ap.add_argument("--no-linpack", action="store_true")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json")
    args = ap.parse_args()
    result: dict = {
        "n": args.N,
        "nb": args.nb,
        "repeat": args.repeat,
        "load_before": os.getloadavg(),
        "wan": {},
    }
    for wan in args.wan_links.split(","):
        name = f"gc{os.getpid() % 100000}"
        cplan, state = virtual.plan(
            name, 2, 2, ["slurm", "slurm"], parse_rate("1gbit"), parse_rate(wan)
        )
        virtual.up(cplan, state)
        per_wan: dict = {}
        try:
            with tempfile.TemporaryDirectory() as tmp:
                store = Store(Path(tmp) / "bench.db")
                for mpi in args.mpi.split(","):
                    groups = []
                    if not args.no_linpack:
                        groups.append(("linpack", "pingpong"))
                    if not args.no_pingpong:
                        groups += [("pingpong", "pingpong"), ("pingpong", "nonblocking")]
                    for kernel, mode in groups:
                        cases = [
                            (
                                placement,
                                compare.Case(
                                    kernel, placement, path, mpi, 2, args.N, args.nb, mode
                                ),
                            )
                            for placement, path in PLACES
                        ]
                        measured = measure(name, store, cases, args.repeat, args.timeout)
                        key = f"{kernel}{'' if kernel == 'linpack' else '-' + mode}-{mpi}"
                        rows = {label: report(f) for label, f in measured.items()}
                        per_wan[key] = rows
                        for what in rows["within"]:
                            w, a = rows["within"][what]["best"], rows["across"][what]["best"]
                            print(
                                f"WAN {wan} {key:26} {what:15} within best {w:10.3f} | across"
                                f" best {a:10.3f} | across/within {a / w:6.3f} (medians "
                                f"{rows['within'][what]['median']:.3f} / "
                                f"{rows['across'][what]['median']:.3f})",
                                flush=True,
                            )
                        if "allocation_s" in rows["across"]:
                            s = rows["across"]["allocation_s"]
                            print(
                                f"WAN {wan} {key:26} grid allocation best {s['best']:.3f} s "
                                f"median {s['median']:.3f} s",
                                flush=True,
                            )
                store.close()
        finally:
            t0 = time.monotonic()
            virtual.down(name)
            left = virtual.leftovers(name)
            if left:
                print(f"LEFT BEHIND: {left}", file=sys.stderr)
        result["wan"][wan] = per_wan
        print(
            f"WAN {wan}: grid down {time.monotonic() - t0:.1f} s; load average now "
            f"{os.getloadavg()[0]:.1f}",
            flush=True,
        )
    result["load_after"] = os.getloadavg()
    print(f"load average {result['load_before'][0]:.1f} -> {result['load_after'][0]:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
