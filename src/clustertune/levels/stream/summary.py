"""The STREAM level's rows of the report's first screen (clustertune.summary): per cluster
and MPI, the best Triad of a whole job over the rank counts run, against one rank's Triad
(the ratio is what the ranks together get out of the memory over one). Runs whose arrays
fit in the caches count only when no run of the series had larger ones, and say so.
hpcc's STREAM runs beside ours only in bench/stream_vs_hpcc.py, whose figures are not
stored."""

from __future__ import annotations

from ... import summary
from .run import failed
from .section import by_ranks, runs, series_key


def rows(records: list[dict]) -> list[summary.Row]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs(records):
        groups.setdefault(series_key(r), []).append(r)
    out = []
    for (cluster, mpi), group in sorted(groups.items()):
        bad = sum(1 for r in group if failed(r))
        # the memory's rates; the caches' only when no run had arrays large enough
        points = by_ranks(group).get((cluster, mpi))
        small = not points
        points = points or by_ranks(group, cache_too=True).get((cluster, mpi), {})
        nps = sorted({r["figures"]["ranks"] for r in group})
        span = f"{nps[0]}{f'-{nps[-1]}' if len(nps) > 1 else ''}"
        row = summary.Row(
            f"Triad, {mpi}, np {span} ({cluster})",
            "no verified run",
            run=group[-1]["id"],
            unit="STREAM Triad",
            # the same rank counts: an earlier part of this sweep (np 1-3 of 1-4) is no "change"
            key=f"stream {cluster} {mpi} np {span}",
            verdict=f"{bad} of {len(group)} FAILED" if bad else f"all {len(group)} verified",
            state=summary.BAD if bad else summary.GOOD,
            over_wire=False,
        )
        if points:
            np, best = max(((n, p["triad_gb_s"]) for n, p in points.items()), key=lambda x: x[1])
            row.figure = f"{best:.1f} GB/s with {np} rank{'s' if np > 1 else ''}"
            row.value = best
            if 1 in points:
                row.reference = f"1 rank: {points[1]['triad_gb_s']:.1f} GB/s"
                row.ratio = best / points[1]["triad_gb_s"]
        if points and small and not bad:
            row.verdict, row.state = "arrays fit in cache", summary.WARN
        out.append(row)
    return out
