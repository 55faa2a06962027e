"""``clustertune tune qcd``: the process grid (decomposition) for a lattice, a rank count
and the cluster at hand, from a short ct-qcd run of each candidate (seeds/003 section 4:
which of the 1-, 2-, 3-, 4-dimensional splits is fastest depends on the network).

1. Candidates: every np1 x np2 x np3 x np4 = np grid that divides the lattice (the qcd
   level's ``run.grids``), one per class of grids that differ only by which axes are
   split (the same multiset of (extent, ranks) pairs: the same local block, halo and
   message count); the class's grid is the one the qcd level would take by default
   (t, z, ... split first). Ordered by halo surface; ``max_candidates`` of them.
2. Each candidate runs ``sweeps`` sweeps from the same hot start and seed, with overlap
   (the kernel's default). A run that is not ok (a failed check, a timeout) excludes its
   grid. Every grid that ran is measured again in reverse order (the first launch of a
   session can be slow, and a load that drifts during the first round favours no
   position); each grid's best run counts.
3. The winner once more without overlap (``--no-overlap``): kept on unless that is
   faster by more than ``OVERLAP_MARGIN``.
4. The plaquette series must be bitwise the same on every grid (the kernel's design): a
   difference is reported as a failure.

The measure is QCDFlops (5700 flops per link update over the wall time of the sweeps,
communication included): what the decomposition costs on this network.
"""

from __future__ import annotations

import uuid

from ...cluster import Cluster
from ...errors import UserError
from ...results import Store
from ..qcd import api as qcd

OVERLAP_MARGIN = 0.05  # overlap stays on unless switching it off wins by more
MAX_CANDIDATES = 6


def candidates(np: int, lattice: tuple[int, ...], limit: int = MAX_CANDIDATES) -> list[tuple]:
    """One grid per class of axis permutations, least halo first (ties: fewer split
    directions, then the qcd level's default order)."""
    found = qcd.grids(np, lattice)
    if not found:
        raise UserError(
            f"--np: no np1xnp2xnp3xnp4 grid of {np} processes divides the lattice "
            f"{qcd.dims_text(lattice)}"
        )
    classes: dict[tuple, tuple] = {}
    for g in sorted(found, key=lambda g: (qcd.halo_sites(lattice, g), qcd.split_dims(g), g)):
        key = tuple(sorted(zip(lattice, g, strict=True)))
        classes.setdefault(key, g)
    return list(classes.values())[:limit]


def rate(record: dict) -> float | None:
    return qcd.gflops(record["figures"]) if record["status"] == "ok" else None


def choose(rates: dict[tuple, list[float | None]]) -> tuple | None:
    """The grid with the best of its rates; a grid with any failed run is excluded."""
    ok = {
        g: max(x for x in r if x is not None)
        for g, r in rates.items()
        if r and all(x is not None for x in r)
    }
    if not ok:
        return None
    return max(ok, key=lambda g: ok[g])


def describe(grid: tuple) -> str:
    return f"{qcd.dims_text(grid)} ({qcd.split_dims(grid)}-D)"


def link_text(cluster: Cluster, hosts: list[str]) -> str:
    rates = {h.link_bps for h in cluster.hosts if h.name in hosts and h.link_bps}
    if len(hosts) < 2:
        return "1 host (no network between ranks)"
    if not rates:
        return f"{len(hosts)} hosts, link rate not declared"
    slowest = min(rates)
    text = f"{slowest / 1e9:g} Gbit/s" if slowest >= 1e9 else f"{slowest / 1e6:g} Mbit/s"
    return f"{len(hosts)} hosts, link {text}"


def tune(
    cluster: Cluster,
    store: Store,
    *,
    lattice: tuple[int, int, int, int],
    np: int,
    mpi: str,
    sweeps: int = 2,
    or_steps: int = 4,
    timeout: float = qcd.TIMEOUT_S,
    hosts: list[str] | None = None,
    max_candidates: int = MAX_CANDIDATES,
) -> dict:
    if sweeps < 1:
        raise UserError(f"--sweeps: at least 1 sweep per candidate, got {sweeps}")
    if max_candidates < 1:
        raise UserError(f"--max-candidates: at least 1, got {max_candidates}")
    grids = candidates(np, lattice, max_candidates)
    total = len({tuple(sorted(zip(lattice, g, strict=True))) for g in qcd.grids(np, lattice)})
    session = uuid.uuid4().hex[:12]
    used = hosts or [h.name for h in cluster.hosts]
    used = used[: max(1, min(len(used), np))]  # ranks go round-robin over the hosts
    records: list[dict] = []
    rates: dict[tuple, list[float | None]] = {g: [] for g in grids}
    by_grid: dict[tuple, list[dict]] = {g: [] for g in grids}

    def measure(grid: tuple, stage: str, overlap: bool = True) -> dict:
        spec = qcd.QcdSpec(
            lattice=lattice,
            grid=grid,
            sweeps=sweeps,
            or_steps=or_steps,
            start="hot",
            seed=1,
            overlap=overlap,
        )
        extra = {
            "tune": session,
            "stage": stage,
            "oversubscribed": qcd.oversubscribed(cluster, np),
        }
        record = qcd.run_qcd(
            cluster, store, spec, np=np, mpi=mpi, timeout=timeout, hosts=hosts, extra=extra
        )
        records.append(record)
        return record

    for g in grids:
        r = measure(g, "grid")
        rates[g].append(rate(r))
        by_grid[g].append(r)
    best = choose(rates)
    ran = [g for g in grids if rates[g][0] is not None]
    if len(ran) > 1:
        for g in reversed(ran):
            r = measure(g, "grid-again")
            rates[g].append(rate(r))
            by_grid[g].append(r)
        best = choose(rates)
    if best is None:
        failed = "; ".join(
            f"{qcd.dims_text(r['params']['grid'])} run {r['id']}: "
            f"{(r['error'] or r['status']).splitlines()[0]}"
            for r in records
        )
        raise UserError(f"tune qcd: no decomposition ran correctly ({failed})")
    best_rate = max(x for x in rates[best] if x is not None)
    no_overlap = measure(best, "overlap", overlap=False)
    off = rate(no_overlap)
    overlap = off is None or off <= (1 + OVERLAP_MARGIN) * best_rate

    same = qcd.series_identical([r for r in records if r["status"] == "ok"])
    f = max(by_grid[best], key=lambda r: rate(r) or 0)["figures"]
    lines = [
        f"lattice {qcd.dims_text(lattice)} on {np} rank(s), {link_text(cluster, used)} "
        f"({cluster.name}); {len(grids)} of {total} decomposition class(es) measured, "
        f"{sweeps} sweep(s) each, {mpi}",
    ]
    for g in grids:
        got = [x for x in rates[g] if x is not None]
        bad = [r for r in by_grid[g] if rate(r) is None]
        runs = ", ".join(str(r["id"]) for r in by_grid[g])
        if bad:
            lines.append(
                f"  {describe(g):<16} excluded: run {bad[0]['id']} {bad[0]['status']} (runs {runs})"
            )
            continue
        rf = max(by_grid[g], key=lambda r: rate(r) or 0)["figures"]
        lines.append(
            f"  {describe(g):<16} {max(got):7.3f} Gflops"
            + (f" (runs: {', '.join(f'{x:.3f}' for x in got)})" if len(got) > 1 else "")
            + f", {qcd.number(rf.get('messages_per_sweep'), '.0f')} msgs/sweep of "
            f"{qcd.number(halo_bytes(rf), '.0f')} B, waiting {percent(rf)} of the time; "
            f"runs {runs}"
        )
    lines.append(
        f"choose {describe(best)}: {best_rate:.3f} Gflops QCDFlops "
        f"({qcd.number(f.get('qcdflops_compute_gflops'), '.3f')} without communication, "
        f"waiting {percent(f)} of the time)"
    )
    lines.append(
        f"overlap {'on' if overlap else 'off'}: "
        + (
            f"{qcd.number(off, '.3f')} Gflops without it (run {no_overlap['id']})"
            if off is not None
            else f"the run without it was {no_overlap['status']} (run {no_overlap['id']})"
        )
    )
    if same is False:
        lines.append(
            "ERROR: the plaquette series differ between grids (they must be bitwise equal)"
        )
    command = (
        f"clustertune qcd --np {np} --lattice {qcd.dims_text(lattice)} "
        f"--grid {qcd.dims_text(best)}" + ("" if overlap else " --no-overlap") + f" --mpi {mpi}"
    )
    return {
        "session": session,
        "lattice": list(lattice),
        "np": np,
        "mpi": mpi,
        "hosts": used,
        "grid": list(best),
        "split_dims": qcd.split_dims(best),
        "gflops": best_rate,
        # the rate behind gflops: the report's readers compute QCDFlops from it (qcd.flops)
        "hb_link_updates_per_s": f.get("hb_link_updates_per_s"),
        "overlap": overlap,
        "no_overlap_gflops": off,
        "series_identical": same,
        "candidates": [
            {
                "grid": list(g),
                "gflops": [x for x in rates[g]],
                "runs": [r["id"] for r in by_grid[g]],
            }
            for g in grids
        ],
        "classes": total,
        "command": command,
        "lines": lines,
        "runs": [r["id"] for r in records],
    }


def percent(figures: dict) -> str:
    """The share of the sweeps' time spent blocked on halo exchanges."""
    t, wait = figures.get("time_s"), figures.get("comm_wait_s")
    if not isinstance(t, int | float) or t <= 0 or not isinstance(wait, int | float):
        return "n/a"
    return f"{100 * wait / t:.0f} %"


def halo_bytes(figures: dict) -> float | None:
    msgs, nbytes = figures.get("messages_per_sweep"), figures.get("bytes_per_sweep")
    return nbytes / msgs if msgs else None
