"""The NPB level's rows of the report's first screen (clustertune.summary): per cluster and
class, each benchmark's best verified Mop/s over the rank counts run, and how many runs
verified. The official NPB build runs beside ours only in bench/npb_vs_official.py, whose
figures are not stored: the row says so rather than invent a reference."""

from __future__ import annotations

from ... import summary
from .section import runs

OFFICIAL = "official build: not stored"


def rows(records: list[dict]) -> list[summary.Row]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in runs(records):
        groups.setdefault((r["meta"]["cluster"]["name"], r["figures"]["class"]), []).append(r)
    out = []
    for (cluster, klass), group in sorted(groups.items()):
        best: dict[str, float] = {}
        for r in group:
            f = r["figures"]
            if r["status"] == "ok" and f.get("verified"):
                best[f["benchmark"]] = max(best.get(f["benchmark"], 0.0), f["mops_total"])
        nps = sorted({r["figures"]["np"] for r in group})
        bad = sum(r["status"] != "ok" or not r["figures"].get("verified") for r in group)
        figure = ", ".join(f"{b} {m:.0f}" for b, m in sorted(best.items()))
        out.append(
            summary.Row(
                f"class {klass}, np {nps[0]}-{nps[-1]} ({cluster})"
                if len(nps) > 1
                else f"class {klass}, np {nps[0]} ({cluster})",
                f"{figure} Mop/s (best)" if figure else "no verified run",
                OFFICIAL,
                verdict=f"{bad} of {len(group)} not verified"
                if bad
                else f"all {len(group)} verified",
                state=summary.BAD if bad else summary.GOOD,
                run=group[-1]["id"],
            )
        )
    return out
