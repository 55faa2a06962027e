"""The launch chain's row of the report's first screen (clustertune.summary)."""

from __future__ import annotations

from ... import summary


def rows(records: list[dict]) -> list[summary.Row]:
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
                over_wire=False,  # whether the ranks started, not how fast
            )
        )
    return out
