#!/usr/bin/env python3
"""The grid's cost, seeds/000's comparison as commands: on a virtual grid of two Slurm
sites (2 hosts each; --scheduler gram|ssh for two sites of that kind) joined by a
--wan-link WAN, for each MPI:

  1. start-up: the probe on 4 ranks across both sites through the grid stack
     (co-allocated Slurm allocations, ranks started by srun --jobid; on GRAM sites
     authenticated at each gatekeeper, the MPI daemons started as GRAM jobs) beside the same 4
     ranks started by the plain vcluster launcher (mpirun over the namespace agent): the
     difference is the grid's start-up overhead;
  2. MPI ping-pong latency and bandwidth inside one site (host0-host1) and across the
     WAN (host0-host2), both through the grid stack (the grid level's ping-pong: its
     bandwidth floor knows the WAN, Open MPI's ranks are not all bound to core 0);
  3. submission start-up per backend, on a second grid of three sites (Slurm, ssh, GRAM;
     2 hosts each): one job through the one submission interface (grid/jobs.py), a
     single /bin/true and a 2-rank MPI job (jobtype=mpi, /bin/true) on the site's two
     hosts: seconds from submit to the job's own start (its ``started`` file) and to
     done as the submitter sees it (the backend's polling included).

Runs alternate in order, --repeat rounds; best and median of each, and the ratios. The
machine is shared: the load average is printed with the result.

Usage (root): bench/grid_overhead.py [--wan-link 100mbit] [--repeat 3] [--scheduler slurm]
    [--no-pingpong] [--only submit]
    [--json out.json]      (about 4 min at load 8; --only submit about 1 min)
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

import clustertune.levels.grid  # noqa: E402, F401
from clustertune import vcluster  # noqa: E402
from clustertune.grid import jobs, virtual  # noqa: E402
from clustertune.grid.source import cluster_from_grid  # noqa: E402
from clustertune.levels.grid import compare  # noqa: E402
from clustertune.levels.probe.run import probe_job  # noqa: E402
from clustertune.results import Store  # noqa: E402
from clustertune.units import parse_rate  # noqa: E402

HOSTS = ["host0", "host1", "host2", "host3"]


def probe_s(cluster, store, mpi: str) -> float:
    begin = time.monotonic()
    record = probe_job(cluster, store, 4, mpi, hosts=HOSTS, params={}, timeout=120)
    if record["status"] != "ok":
        raise SystemExit(f"probe failed: {record['error']}")
    return time.monotonic() - begin


def pingpong_figures(state: dict, store, placement: str, mpi: str) -> dict:
    """The grid level's ping-pong through the grid stack (bandwidth from messages many tbf
    buckets of the slowest link crossed; Open MPI ranks unbound: levels/grid/compare.py)."""
    case = compare.Case("pingpong", placement, "grid", mpi, max_size=4 << 20)
    record = compare.run_case(state, store, case, timeout=600)
    if record["status"] != "ok":
        raise SystemExit(f"ping-pong {placement} failed: {record['error']}")
    f = record["figures"]
    return {
        k: round(f[k], 1) if f.get(k) is not None else None
        for k in ("latency_us", "bandwidth_mbps")
    }


def summary(values: list[float]) -> dict:
    return {"best": min(values), "median": statistics.median(values)}


SUBMIT_SITES = {"slurm": "site0", "ssh": "site1", "gram": "site2"}
SUBMIT_JOBS = {
    "single": jobs.GridJob("/bin/true"),
    "mpi": jobs.GridJob("/bin/true", count=2, jobtype="mpi", mpi="openmpi"),
}


def submission_s(state: dict, scheduler: str, kind: str) -> tuple[float, float]:
    """(submit to the job's own start, submit to done as polled) of one job."""
    backend = jobs.backend(state, SUBMIT_SITES[scheduler])
    begin, wall = time.monotonic(), time.time()
    handle = backend.submit(jobs.GridJob(**vars(SUBMIT_JOBS[kind])))
    result = jobs.wait(backend, handle, 120)
    done = time.monotonic() - begin
    if result.state != "done":
        raise SystemExit(f"{scheduler} {kind} job: {result.state}: {result.stderr[-300:]}")
    return (Path(handle.dir) / "started").stat().st_mtime - wall, done


def submissions(wan: str, repeat: int) -> dict:
    """Part 3: each backend's start-up, rounds alternating the backends' order."""
    name = f"gs{os.getpid() % 100000}"
    cplan, state = virtual.plan(
        name, 3, 2, list(SUBMIT_SITES), parse_rate("1gbit"), parse_rate(wan)
    )
    out: dict = {}
    try:
        state = virtual.up(cplan, state)
        for kind in SUBMIT_JOBS:
            seen: dict[str, list[tuple[float, float]]] = {k: [] for k in SUBMIT_SITES}
            for i in range(repeat):
                order = list(SUBMIT_SITES) if i % 2 == 0 else list(SUBMIT_SITES)[::-1]
                for scheduler in order:
                    seen[scheduler].append(submission_s(state, scheduler, kind))
            for scheduler, pairs in seen.items():
                start, done = summary([p[0] for p in pairs]), summary([p[1] for p in pairs])
                out[f"submit_{kind}_{scheduler}"] = {"start_s": start, "done_s": done}
                print(
                    f"{kind:6} job via {scheduler:5}: start best {start['best']:.2f} s median "
                    f"{start['median']:.2f} s | done best {done['best']:.2f} s median "
                    f"{done['median']:.2f} s",
                    flush=True,
                )
    finally:
        virtual.down(name)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wan-link", default="100mbit")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument(
        "--scheduler",
        default="slurm",
        choices=("slurm", "gram", "ssh"),
        help="both sites' scheduler in parts 1 and 2",
    )
    ap.add_argument("--no-pingpong", action="store_true")
    ap.add_argument("--only", choices=("submit",), help="only part 3 (submission start-up)")
    ap.add_argument("--json")
    args = ap.parse_args()
    if args.only == "submit":
        result = {
            "load_before": os.getloadavg(),
            **submissions(args.wan_link, args.repeat),
            "load_after": os.getloadavg(),
        }
        print(f"load average {result['load_before'][0]:.1f} -> {result['load_after'][0]:.1f}")
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1))
        return 0
    name = f"gb{os.getpid() % 100000}"
    cplan, state = virtual.plan(
        name, 2, 2, [args.scheduler] * 2, parse_rate("1gbit"), parse_rate(args.wan_link)
    )
    t0 = time.monotonic()
    virtual.up(cplan, state)
    up_s = time.monotonic() - t0
    result: dict = {
        "wan": args.wan_link,
        "scheduler": args.scheduler,
        "grid_up_s": up_s,
        "load_before": os.getloadavg(),
    }
    try:
        grid = cluster_from_grid(virtual.load(name))
        plain = vcluster.cluster_from_state(vcluster.load_state(name))
        with tempfile.TemporaryDirectory() as tmp:
            store = Store(Path(tmp) / "bench.db")
            for mpi in ("openmpi", "mpich"):
                times: dict[str, list[float]] = {"grid": [], "plain": []}
                for i in range(args.repeat):
                    order = [("grid", grid), ("plain", plain)]
                    for label, cluster in order if i % 2 == 0 else order[::-1]:
                        times[label].append(probe_s(cluster, store, mpi))
                g, p = summary(times["grid"]), summary(times["plain"])
                result[f"startup_{mpi}"] = {
                    "grid_s": g,
                    "plain_s": p,
                    "overhead_s_best": g["best"] - p["best"],
                    "ratio_best": g["best"] / p["best"],
                }
                print(
                    f"{mpi}: probe 4 ranks across 2 sites: grid best {g['best']:.2f} s "
                    f"median {g['median']:.2f} s | plain best {p['best']:.2f} s median "
                    f"{p['median']:.2f} s | overhead {g['best'] - p['best']:.2f} s "
                    f"(x{g['best'] / p['best']:.2f})",
                    flush=True,
                )
                if args.no_pingpong:
                    continue
                inside = pingpong_figures(virtual.load(name), store, "within", mpi)
                across = pingpong_figures(virtual.load(name), store, "across", mpi)
                result[f"pingpong_{mpi}"] = {"inside": inside, "across": across}
                print(
                    f"{mpi}: ping-pong inside a site {inside} | across the WAN {across}", flush=True
                )
            store.close()
    finally:
        t0 = time.monotonic()
        virtual.down(name)
        result["grid_down_s"] = time.monotonic() - t0
    result.update(submissions(args.wan_link, args.repeat))
    result["load_after"] = os.getloadavg()
    print(
        f"grid up {up_s:.1f} s, down {result['grid_down_s']:.1f} s; load average "
        f"{result['load_before'][0]:.1f} -> {result['load_after'][0]:.1f}"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
