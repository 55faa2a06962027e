"""``clustertune qcd study``: seeds/003's decomposition study (section 4.4-4.5, table 2,
figures 7-9). The same lattice, seed and sweeps on 1-, 2-, 3- and 4-dimensional process
grids of one process count: QCDFlops with and without communication, the communication
time and throughput, messages and bytes per sweep, and whether the plaquette series is
bitwise the same on every grid (it must be). Each decomposition is its own record, tied
to the others by ``params.study``."""

from __future__ import annotations

import argparse
import os
import time

from ...cluster import Cluster
from ...commands import Output, cluster_of, open_store
from ...errors import UserError
from ...results import Store
from . import flops, run
from .paper import table2


def decompositions(np: int, lattice: tuple[int, ...], dims: list[int]) -> dict[int, tuple]:
    """One grid per split-dimension count: the paper's table 2 where it has np and the grid
    divides the lattice, else the grid of that many split directions with the least halo
    surface (ties: the leading directions split, as the paper's table does)."""
    paper = table2(np) or {}
    out: dict[int, tuple] = {}
    for k in dims:
        grid = paper.get(k)
        if grid and all(n % p == 0 for n, p in zip(lattice, grid, strict=True)):
            out[k] = grid
            continue
        found = [g for g in run.grids(np, lattice) if run.split_dims(g) == k]
        if found:
            out[k] = min(found, key=lambda g: (run.halo_sites(lattice, g), [-x for x in g]))
    if not out:
        raise UserError(
            f"--np: {np} processes split no way asked for ({', '.join(map(str, dims))}-D) "
            f"over the lattice {run.dims_text(lattice)}"
        )
    return out


def run_study(
    cluster: Cluster,
    store: Store,
    *,
    np: int,
    mpi: str,
    lattice: tuple[int, int, int, int],
    dims: list[int],
    sweeps: int,
    beta: float = 6.0,
    or_steps: int = 4,
    seed: int = 1,
    overlap: bool = True,
    timeout: float = run.TIMEOUT_S,
    hosts: list[str] | None = None,
) -> list[dict]:
    """Every decomposition of ``decompositions``, in order of split dimensions."""
    study = f"qcd-{time.strftime('%Y%m%dT%H%M%S')}-{np}"
    records = []
    grids = decompositions(np, lattice, dims)
    for _, grid in sorted(grids.items()):
        spec = run.QcdSpec(
            lattice=lattice,
            grid=grid,
            beta=beta,
            sweeps=sweeps,
            or_steps=or_steps,
            start="hot",
            seed=seed,
            overlap=overlap,
        )
        records.append(
            run.run_qcd(
                cluster,
                store,
                spec,
                np=np,
                mpi=mpi,
                timeout=timeout,
                hosts=hosts,
                extra={"study": study, "oversubscribed": oversubscribed(cluster, np)},
            )
        )
    return records


def oversubscribed(cluster: Cluster, np: int) -> bool:
    """More ranks than the cores the cluster declares (a virtual cluster shares one
    machine's cores: the study then measures the schedule, not a network's speed)."""
    cores = sum(h.cores for h in cluster.hosts)
    if cluster.launcher in ("local", "vcluster"):
        cores = os.cpu_count() or 1
    return np > cores


def series_identical(records: list[dict]) -> bool | None:
    """Whether every finished run of a study printed the same plaquette series, bit for bit."""
    series = [
        r["figures"].get("plaquette_series")
        for r in records
        if r["figures"].get("plaquette_series")
    ]
    if len(series) < 2:
        return None
    return all(s == series[0] for s in series[1:])


def rows(records: list[dict]) -> list[dict]:
    """One row per decomposition: the figures of figures 7-9 and tables 4-5."""
    out = []
    for r in records:
        f, p = r["figures"], r["params"]
        t, comm = f.get("time_s"), f.get("comm_wait_s")
        msgs, nbytes = f.get("messages_per_sweep"), f.get("bytes_per_sweep")
        out.append(
            {
                "run": r["id"],
                "dims": p["split_dims"],
                "grid": run.dims_text(p["grid"]),
                "status": r["status"],
                "verification": r["verification"],
                "qcdflops_gflops": flops.gflops(f),
                "qcdflops_compute_gflops": flops.compute_gflops(f),
                "time_s": t,
                "compute_time_s": f.get("compute_time_s"),
                "comm_time_s": f.get("comm_time_s"),
                "comm_wait_s": comm,
                "comm_share": comm / t
                if isinstance(t, float) and t > 0 and comm is not None
                else None,
                "comm_mbps": f.get("comm_mbps"),
                "messages_per_sweep": msgs,
                "bytes_per_message": nbytes / msgs if msgs else None,
                "link_updates_per_s": f.get("link_updates_per_s"),
            }
        )
    return out


def study_text(records: list[dict]) -> str:
    p = records[0]["params"]
    lines = [
        f"QCD decomposition study {p.get('study')}: lattice {run.dims_text(p['lattice'])}, "
        f"np {p['np']}{' (oversubscribed)' if p.get('oversubscribed') else ''}, "
        f"{p['sweeps']} sweeps, beta {p['beta']}",
        f"  {'dims':>4} {'grid':>10} {'Gflops':>8} {'(no comm)':>9} {'comm s':>8} "
        f"{'wait %':>6} {'MB/s':>8} {'msgs/sweep':>10} {'bytes/msg':>10}  check",
    ]
    for row in rows(records):
        share = row["comm_share"]
        lines.append(
            f"  {row['dims']:>4} {row['grid']:>10} {run.number(row['qcdflops_gflops'], '8.3f')} "
            f"{run.number(row['qcdflops_compute_gflops'], '9.3f')} "
            f"{run.number(row['comm_time_s'], '8.3f')} "
            f"{run.number(100 * share if share is not None else None, '6.1f')} "
            f"{run.number(row['comm_mbps'], '8.1f')} {run.number(row['messages_per_sweep'], '10.0f')} "
            f"{run.number(row['bytes_per_message'], '10.0f')}  {row['verification']}"
        )
    same = series_identical(records)
    if same is not None:
        lines.append(
            f"  plaquette series bitwise identical on every grid: {'yes' if same else 'NO'}"
        )
    return "\n".join(lines)


def cmd_study(args: argparse.Namespace) -> Output:
    lattice = run.parse_dims(args.lattice, "--lattice")
    dims = [int(d) for d in args.dims.split(",") if d.strip()] if args.dims else [1, 2, 3, 4]
    if any(d not in (1, 2, 3, 4) for d in dims):
        raise UserError(f"--dims: split dimensions are 1 to 4, got {args.dims!r}")
    records = run_study(
        cluster_of(args),
        open_store(args),
        np=args.np,
        mpi=args.mpi,
        lattice=lattice,
        dims=dims,
        sweeps=args.sweeps,
        beta=args.beta,
        or_steps=args.or_steps,
        seed=args.seed,
        overlap=not args.no_overlap,
        timeout=args.timeout,
        hosts=args.hosts,
    )
    ok = all(r["status"] == "ok" for r in records) and series_identical(records) is not False
    payload = {
        "study": records[0]["params"]["study"],
        "rows": rows(records),
        "series_identical": series_identical(records),
        "records": [r["id"] for r in records],
    }
    return Output(payload, study_text(records), 0 if ok else 1)
