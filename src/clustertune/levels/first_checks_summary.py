"""The report's first-screen rows (clustertune.summary) of the two single-module levels
that check a cluster before measuring it: ``hosts`` (the inventory) and ``probe`` (the
launch chain). Kept beside them rather than in them, as every level's rows sit beside its
section."""

from __future__ import annotations

from .. import summary
from . import hosts, probe


@hosts.LEVEL.summary
def inventory_rows(records: list[dict]) -> list[summary.Row]:
    newest = {r["meta"]["cluster"]["name"]: r for r in records}
    out = []
    for cluster, r in newest.items():
        found = r["samples"]
        kinds = {(h["cpu"]["model"], h["cpu"]["cores"], h["memory_bytes"]) for h in found}
        if not found:
            figure = "no host read"
        elif len(kinds) == 1:
            model, cores, memory = kinds.pop()
            shown = f"{memory / 2**30:.1f} GiB" if memory else "memory not read"
            figure = f"{len(found)} x {model}, {cores} cores, {shown}"
        else:
            figure = f"{len(found)} hosts of {len(kinds)} kinds"
        missing = hosts.unreachable_of(r)
        out.append(
            summary.Row(
                f"inventory ({cluster})",
                figure,
                run=r["id"],
                verdict=f"{len(missing)} host(s) not read" if missing else "every host read",
                state=summary.BAD if missing else summary.GOOD,
            )
        )
    return out


@probe.LEVEL.summary
def launch_rows(records: list[dict]) -> list[summary.Row]:
    """Per cluster, the newest probe of each MPI in one row."""
    newest: dict[str, dict[str, dict]] = {}
    for r in records:
        mpi = (r["meta"].get("mpi") or {}).get("flavour") or "-"
        newest.setdefault(r["meta"]["cluster"]["name"], {})[mpi] = r
    out = []
    for cluster, by_mpi in newest.items():
        runs = list(by_mpi.values())
        reached = {s["host"] for r in runs for s in r["samples"]}
        ranks = max(len(r["samples"]) for r in runs)
        bad = [
            mpi for mpi, r in by_mpi.items() if r["status"] != "ok" or r["verification"] != "passed"
        ]
        out.append(
            summary.Row(
                f"launch with {', '.join(sorted(by_mpi))} ({cluster})",
                f"{ranks} ranks on {len(reached)} host(s)",
                run=max(r["id"] for r in runs),
                verdict=f"FAILED with {', '.join(bad)}" if bad else "one MPI_COMM_WORLD each",
                state=summary.BAD if bad else summary.GOOD,
            )
        )
    return out
