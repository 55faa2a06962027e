"""The QCD level's rows of the report's first screen (clustertune.summary): per cluster and
lattice, the newest run's link updates per second; per decomposition study, the best
decomposition against the worst (seeds/003's question)."""

from __future__ import annotations

from ... import summary
from . import flops, run, study
from .section import studies


def run_row(r: dict) -> summary.Row:
    f, p = r["figures"], r["params"]
    cluster, lattice = r["meta"]["cluster"]["name"], run.dims_text(p.get("lattice", []))
    row = summary.Row(
        f"lattice {lattice}, grid {run.dims_text(p.get('grid', []))}, np {p.get('np')} ({cluster})",
        "",
        run=r["id"],
        unit="QCD",
        key=f"qcd {cluster} {lattice}",
    )
    rate = f.get("link_updates_per_s")
    if r["status"] != "ok" or not rate:
        row.figure, row.verdict, row.state = "no result", f"{r['status']}", summary.BAD
        return row
    row.figure = f"{rate:.3g} link updates/s ({run.number(flops.gflops(f), '.2f')} QCDFlops G)"
    row.value = rate
    row.verdict = "verified" if r["verification"] == "passed" else r["verification"]
    row.state = summary.GOOD if r["verification"] == "passed" else summary.WARN
    return row


def study_row(name: str, group: list[dict]) -> summary.Row | None:
    done = [
        x
        for x, r in zip(study.rows(group), group, strict=True)
        if x["qcdflops_gflops"] is not None and r["status"] == "ok"
    ]
    if len(done) < 2:
        return None
    best = max(done, key=lambda x: x["qcdflops_gflops"])
    worst = min(done, key=lambda x: x["qcdflops_gflops"])
    same = study.series_identical(group)
    return summary.Row(
        f"decomposition study, {len(done)} grids ({group[0]['meta']['cluster']['name']})",
        f"best {best['dims']}-D {best['grid']} {best['qcdflops_gflops']:.2f} QCDFlops G",
        f"worst {worst['dims']}-D {worst['grid']} {worst['qcdflops_gflops']:.2f}",
        ratio=best["qcdflops_gflops"] / worst["qcdflops_gflops"],
        verdict="plaquette identical" if same else "plaquette DIFFERS" if same is False else "",
        state=summary.BAD if same is False else summary.GOOD,
        run=max(r["id"] for r in group),
    )


def rows(records: list[dict]) -> list[summary.Row]:
    newest: dict[tuple, dict] = {}
    for r in records:
        if not r["params"].get("study") and not r["params"].get("tune"):  # the tuner's: tune
            newest[(r["meta"]["cluster"]["name"], tuple(r["params"].get("lattice", [])))] = r
    out = [run_row(r) for r in newest.values()]
    groups = studies(records)
    if groups:  # the newest study only: the section has every one
        name = max(groups, key=lambda k: max(r["id"] for r in groups[k]))
        out += [row for row in [study_row(name, groups[name])] if row]
    return out
