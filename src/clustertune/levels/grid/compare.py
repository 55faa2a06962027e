"""seeds/000's comparison on a virtual grid: the same kernel on the same number of ranks
(a) inside one site, started by the plain launcher (the seed's plain MPICH inside a
cluster) and (b) across two sites through the grid stack (co-allocated allocations,
ranks started by each site's access path: the seed's MPICH-G2), so the WAN's cost shows
as its own figure. Kernels: Linpack (ct-linpack, P x Q = 1 x ranks) and the mpptest-style
MPI ping-pong (ct-mpi-pingpong, blocking or non-blocking).

Every run is a record of the grid level (``level = "grid"``) carrying in ``params`` the
placement (``within`` | ``across``), the path (``plain`` | ``grid``) and the grid's sites,
and in ``meta["coalloc"]`` the co-allocation timeline the grid launcher reported
(per site: scheduler, allocation, requested, granted, started, ended; the heartbeat's
verdict), from which ``figures["allocation_s"]`` (first request to last grant) and
``figures["job_s"]`` (the MPI launcher's wall time) come.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass

from ... import kernels, vcluster
from ...cluster import Cluster
from ...errors import UserError
from ...grid import virtual
from ...grid.source import cluster_from_grid
from ...launch import mpi as mpi_flavours
from ...netns import tbf_burst_bytes
from ...results import Store
from ...runner import Run
from ..linpack import api as linpack
from ..network import api as network
from . import LEVEL

PLACEMENTS = ("within", "across")
PATHS = ("plain", "grid")
COALLOC_TAG = "clustertune-coalloc: {"
# a short sweep: enough points for latency and bandwidth, seconds even at 100 Mbit
QUICK_SWEEP = (
    "--perturbation",
    "0",
    "--points-per-octave",
    "1",
    "--trials",
    "3",
    "--point-time",
    "0.02",
)


@dataclass(frozen=True)
class Case:
    kernel: str  # "linpack" | "pingpong"
    placement: str  # "within" | "across"
    path: str = "grid"  # "plain": the vcluster launcher; "grid": the grid launcher
    mpi: str = mpi_flavours.DEFAULT.name
    ranks: int = 2
    n: int = 2000  # Linpack
    nb: int = 64
    mode: str = "pingpong"  # ping-pong: "pingpong" (blocking) | "nonblocking"
    max_size: int = 4 << 20
    quick: bool = True  # ping-pong: the short sweep
    hosts: tuple[str, ...] = ()  # other hosts than the placement's first ones


def grid_summary(state: dict) -> dict:
    """What a record keeps of the grid: its sites (scheduler, contact, hosts), links."""
    return {
        "name": state["name"],
        "link_bps": state.get("link_bps"),
        "wan_bps": state.get("wan_bps"),
        "origin": state.get("origin"),
        "sites": [
            {
                "name": s["name"],
                "scheduler": s["scheduler"],
                "contact": s["contact"],
                "hosts": [h["name"] for h in s["hosts"]],
            }
            for s in state["sites"]
        ],
    }


def placement_hosts(state: dict, placement: str, ranks: int) -> list[str]:
    """``ranks`` hosts (one rank each): all in the first site (``within``) or taken from
    the first two sites in turn (``across``); a UserError when the grid is too small."""
    sites = [[h["name"] for h in s["hosts"]] for s in state["sites"]]
    if placement == "within":
        if len(sites[0]) < ranks:
            raise UserError(
                f"within one site needs {ranks} hosts in {state['sites'][0]['name']}"
                f" (it has {len(sites[0])}): use --hosts-per-site {ranks}"
            )
        return sites[0][:ranks]
    if placement != "across":
        raise UserError(f"placement {placement!r}: expected one of {', '.join(PLACEMENTS)}")
    if len(sites) < 2:
        raise UserError("across sites needs a grid of two sites or more")
    hosts = [sites[i % 2][i // 2] for i in range(ranks) if i // 2 < len(sites[i % 2])]
    if len(hosts) < ranks:
        raise UserError(f"across two sites needs {(ranks + 1) // 2} hosts per site")
    return hosts


def cluster_for(state: dict, path: str) -> Cluster:
    if path == "grid":
        return cluster_from_grid(state)
    if path == "plain":
        return vcluster.cluster_from_state(vcluster.load_state(state["name"]))
    raise UserError(f"path {path!r}: expected one of {', '.join(PATHS)}")


def coalloc_report(stderr: str) -> dict | None:
    """The grid launcher's ``clustertune-coalloc: {json}`` line, if it wrote one."""
    for line in reversed(stderr.splitlines()):
        at = line.find(COALLOC_TAG)
        if at >= 0:
            try:
                return json.loads(line[at + len(COALLOC_TAG) - 1 :])
            except ValueError:
                return None
    return None


def timeline_figures(report: dict) -> dict:
    sites = list(report.get("sites", {}).values())
    out: dict = {}
    requested = [s["requested"] for s in sites if "requested" in s]
    granted = [s["granted"] for s in sites if "granted" in s]
    if requested and len(granted) == len(sites):
        out["allocation_s"] = round(max(granted) - min(requested), 3)
    ends = [(s["started"], s["ended"]) for s in sites if "started" in s and "ended" in s]
    if ends:
        out["job_s"] = round(max(e for _, e in ends) - min(s for s, _ in ends), 3)
    return out


def shaped_min_size(state: dict, placement: str) -> int:
    """The smallest message whose throughput counts as bandwidth on the virtual grid's
    shaped path: on a tbf wire many buckets of the slowest link crossed (the WAN across
    sites), as the network level reads a tbf-shaped virtual cluster (its own rule sees
    neither the grid launcher nor the WAN); 0 on the paced wire, whose pacers hold the
    hosts' links and what crosses the WAN to their rates at every size."""
    if state.get("wire") == "paced":
        return 0
    rates = [r for r in (state.get("link_bps"),) if r]
    if placement == "across" and state.get("wan_bps"):
        rates.append(state["wan_bps"])
    if not rates:
        return 0
    burst = network.TBF_BUCKETS * tbf_burst_bytes(min(rates))
    return max(network.TBF_BANDWIDTH_MIN_SIZE_BYTES, burst)


def linpack_args(case: Case) -> list[str]:
    return linpack.fixed_lu_args(case.n, case.nb, 1, case.ranks, "--seed", "1")


def run_case(state: dict, store: Store, case: Case, timeout: float = 300.0) -> dict:
    """One case as one stored record of the grid level."""
    cluster = cluster_for(state, case.path)
    hosts = list(case.hosts) or placement_hosts(state, case.placement, case.ranks)
    params = {
        "comparison": case.kernel,
        "placement": case.placement,
        "path": case.path,
        "grid": grid_summary(state),
        "ranks": case.ranks,
    }
    if case.kernel == "linpack":
        kargs = linpack_args(case)
        kernels.check_args(linpack.LINPACK_KERNEL, case.ranks, case.mpi, kargs)
        kernel, derive, env = linpack.LINPACK_KERNEL, linpack.derive, linpack.BLAS_THREADS
        params |= {"n": case.n, "nb": case.nb, "args": kargs}
    elif case.kernel == "pingpong":
        if case.ranks != 2:
            raise UserError("the ping-pong runs on two ranks")
        spec = network.PingpongSpec(
            "mpi",
            hosts[0],
            hosts[1],
            mode=case.mode,
            mpi=case.mpi,
            max_size=case.max_size,
            extra_args=QUICK_SWEEP if case.quick else (),
        )
        network.validate(cluster, spec)
        min_size = shaped_min_size(state, case.placement)
        kargs = network.sweep_args(spec)
        kernel, derive, env = network.MPI_KERNEL, network.derive_for(min_size, case.mode), {}
        params |= spec.params(min_size)
    else:
        raise UserError(f"kernel {case.kernel!r}: expected linpack or pingpong")
    run = Run(
        cluster,
        store,
        level=LEVEL.name,
        kernel=kernel,
        params=params,
        hosts=hosts,
        np=case.ranks,
        mpi=case.mpi,
        env=env,
        derive=derive,
    )
    with contextlib.suppress(GridLost), run:
        step = run.mpi(
            kernel, np=case.ranks, mpi=case.mpi, args=kargs, hosts=hosts, timeout=timeout
        )
        report = coalloc_report(step.completed.stderr)
        if report is not None:
            run.record["meta"]["coalloc"] = report
            run.figures.update(timeline_figures(report))
            if report.get("heartbeat"):  # failed, whatever the kernel had measured
                raise GridLost(f"heartbeat: {report['heartbeat']}; the job was stopped")
            if report.get("error"):
                raise GridLost(f"co-allocation: {report['error']}")
    return run.record


class GridLost(UserError):
    """A part of the grid died under the job, or the job never started: the run is
    failed with this reason (the samples measured before are kept)."""


def default_cases(
    kernels_: tuple[str, ...],
    mpis: tuple[str, ...],
    n: int,
    nb: int,
    modes: tuple[str, ...] = ("pingpong",),
    max_size: int = 4 << 20,
    quick: bool = True,
    ranks: int = 2,
) -> list[Case]:
    """Within one site (plain launcher) then across sites (grid stack), per kernel, MPI;
    Linpack on ``ranks`` ranks (one per host), the ping-pong on two."""
    cases = []
    for mpi in mpis:
        for kernel in kernels_:
            for mode in modes if kernel == "pingpong" else ("pingpong",):
                np = ranks if kernel == "linpack" else 2
                for placement, path in (("within", "plain"), ("across", "grid")):
                    cases.append(
                        Case(kernel, placement, path, mpi, np, n, nb, mode, max_size, quick)
                    )
    return cases


def run_cases(name: str, store: Store, cases: list[Case], timeout: float = 300.0) -> list[dict]:
    state = virtual.load(name)
    if state is None:
        raise UserError(f"no virtual grid {name!r} (see 'clustertune grid status')")
    for case in cases:  # every placement is checked before the first run
        placement_hosts(state, case.placement, case.ranks)
    return [run_case(state, store, case, timeout) for case in cases]


def pairs(records: list[dict]) -> list[dict]:
    """Within-site and across-site results side by side: one row per (grid, WAN, kernel,
    mode, MPI), the latest ok record of each placement."""
    latest: dict[tuple, dict[str, dict]] = {}
    for r in records:
        p = r["params"]
        if r["status"] != "ok" or "placement" not in p:
            continue
        key = (
            p["grid"]["name"],
            p["grid"].get("wan_bps"),
            p["comparison"],
            p.get("mode") or "-",
            (r["meta"].get("mpi") or {}).get("flavour"),
            p.get("n"),
            p.get("ranks", 2),
        )
        latest.setdefault(key, {})[p["placement"]] = r
    rows = []
    for (grid, wan, what, mode, mpi, n, ranks), by in latest.items():
        row = {
            "grid": grid,
            "wan_bps": wan,
            "kernel": what,
            "mode": mode,
            "mpi": mpi,
            "n": n,
            "ranks": ranks,
        }
        for placement, r in by.items():
            f = r["figures"]
            if what == "linpack":
                best = max((s["gflops"] for s in r["samples"] if s.get("passed")), default=None)
                row[f"{placement}_gflops"] = best
            else:
                row[f"{placement}_latency_us"] = f.get("latency_us")
                row[f"{placement}_bandwidth_mbps"] = f.get("bandwidth_mbps")
            row[f"{placement}_run"] = r["id"]
        rows.append(row)
    return rows
