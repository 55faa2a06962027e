"""The QCD level's report section: every run's figures, the decomposition studies as
seeds/003 shows them (QCDFlops with and without communication, throughput, messages per
sweep; the computation / communication split of its figures 7-9), the plaquette series,
and the paper's tables 4 and 5 beside them."""

from __future__ import annotations

from collections import defaultdict

from ... import ranktimes
from ...render import esc, fold, folded_table, pyplot, svg, table
from . import flops, run, study
from .paper import paper


def num(value: object, spec: str) -> str:
    return run.number(value, spec) if value is not None else "-"


def runs_table(records: list[dict]) -> str:
    rows = []
    for r in records:
        f, p = r["figures"], r["params"]
        rows.append(
            [
                r["id"],
                r["meta"]["cluster"]["name"],
                run.dims_text(p.get("lattice", [])),
                run.dims_text(p.get("grid", [])),
                p.get("np"),
                p.get("beta"),
                p.get("sweeps"),
                num(f.get("plaquette"), ".6f"),
                num(f.get("link_updates_per_s"), ".3g"),
                num(flops.gflops(f), ".3f"),
                num(flops.compute_gflops(f), ".3f"),
                num(f.get("counted_gflops"), ".3f"),
                num(f.get("comm_time_s"), ".3f"),
                num(f.get("comm_mbps"), ".1f"),
                num(f.get("messages_per_sweep"), ".0f"),
                r["verification"],
            ]
        )
    headers = [
        "run",
        "cluster",
        "lattice",
        "grid",
        "np",
        "beta",
        "sweeps",
        "plaquette",
        "link upd/s",
        "QCDFlops G",
        "(no comm)",
        "counted G",
        "comm s",
        "halo MB/s",
        "msgs/sweep",
        "verification",
    ]
    failed = [i for i, r in enumerate(records) if r["status"] != "ok"]
    return folded_table(headers, rows, failed, "QCD runs (failed above)")


def studies(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        if r["params"].get("study"):
            out[r["params"]["study"]].append(r)
    return {k: sorted(v, key=lambda r: r["params"]["split_dims"]) for k, v in out.items()}


def study_table(records: list[dict]) -> str:
    rows = [
        [
            row["run"],
            row["dims"],
            row["grid"],
            num(row["qcdflops_gflops"], ".3f"),
            num(row["qcdflops_compute_gflops"], ".3f"),
            num(row["compute_time_s"], ".3f"),
            num(row["comm_time_s"], ".3f"),
            num(row["comm_wait_s"], ".3f"),
            num(row["comm_mbps"], ".1f"),
            num(row["messages_per_sweep"], ".0f"),
            num(row["bytes_per_message"], ".0f"),
            row["verification"],
        ]
        for row in study.rows(records)
    ]
    headers = [
        "run",
        "dims",
        "grid",
        "QCDFlops G",
        "(no comm)",
        "compute s",
        "comm s",
        "waiting s",
        "halo MB/s",
        "msgs/sweep",
        "bytes/msg",
        "verification",
    ]
    return table(headers, rows)


def link_text(record: dict) -> str:
    """The nominal link of the cluster a study ran on (one rate, or the rates seen)."""
    rates = {v for v in record["meta"]["cluster"].get("link_bps", {}).values() if v}
    if not rates:
        return "unshaped"
    return ", ".join(f"{r / 1e6:g} Mbit/s" for r in sorted(rates))


def winners_table(groups: dict[str, list[dict]]) -> str:
    """Which decomposition won each study: the paper's question, per network."""
    rows = []
    for name, group in groups.items():
        done = [
            (row, r)
            for row, r in zip(study.rows(group), group, strict=True)
            if row["qcdflops_gflops"] is not None and r["status"] == "ok"
        ]
        if not done:
            continue
        best = max(done, key=lambda x: x[0]["qcdflops_gflops"])[0]
        worst = min(done, key=lambda x: x[0]["qcdflops_gflops"])[0]
        p = group[0]["params"]
        rows.append(
            [
                name,
                group[0]["meta"]["cluster"]["name"],
                link_text(group[0]),
                run.dims_text(p["lattice"]),
                p["np"],
                f"{best['dims']}-D {best['grid']}",
                num(best["qcdflops_gflops"], ".3f"),
                f"{worst['dims']}-D {worst['grid']}",
                num(worst["qcdflops_gflops"], ".3f"),
            ]
        )
    return (
        table(
            ["study", "cluster", "link", "lattice", "np", "best", "Gflops", "worst", "Gflops"], rows
        )
        if rows
        else ""
    )


def study_figure(records: list[dict]) -> str:
    rows = [r for r in study.rows(records) if r["time_s"]]
    if not rows:
        return ""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.4))
    labels = [f"{r['dims']}-D\n{r['grid']}" for r in rows]
    compute = [r["time_s"] - (r["comm_wait_s"] or 0.0) for r in rows]
    wait = [r["comm_wait_s"] or 0.0 for r in rows]
    ax1.bar(labels, compute, label="computation")
    ax1.bar(labels, wait, bottom=compute, label="communication (waiting)")
    ax1.set(ylabel="seconds", title="run time split (seeds/003 figs 7-9)")
    ax1.legend(fontsize="small")
    ax2.plot(labels, [r["qcdflops_gflops"] for r in rows], "o-", label="QCDFlops")
    ax2.plot(labels, [r["qcdflops_compute_gflops"] for r in rows], "s--", label="without comm")
    ax2.set(ylabel="Gflops (5700 x HB links / s)", title="QCDFlops per decomposition")
    ax2.legend(fontsize="small")
    return svg(fig)


def series_figure(records: list[dict]) -> str:
    shown = [r for r in records if r["figures"].get("plaquette_series")][-6:]
    if not shown:
        return ""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.2))
    for r in shown:
        f, p = r["figures"], r["params"]
        ax.plot(
            f["plaquette_sweeps"],
            f["plaquette_series"],
            ".-",
            label=f"run {r['id']} beta {p.get('beta')} {run.dims_text(p.get('lattice', []))}",
        )
    for ref in paper()["plaquette_references"]:
        ax.axhline(ref["plaquette"], color="grey", lw=0.6, ls=":")
    ax.set(xlabel="sweep", ylabel="plaquette", title="plaquette series (dotted: literature)")
    ax.legend(fontsize="x-small")
    return svg(fig)


def paper_table() -> str:
    rows = []
    for key in ("table4", "table5"):
        t = paper()[key]
        for row in t["rows"]:
            rows.append(
                [
                    key.replace("table", "table "),
                    run.dims_text(t["lattice"]),
                    row["machine"],
                    row["pes"],
                    f"{row['dims']}-D",
                    f"{row['gflops']:.2f}",
                    f"{row['gflops_no_comm']:.2f}",
                    f"{row['mb_s']:.2f}",
                ]
            )
    return table(
        ["seeds/003", "lattice", "machine", "PEs", "split", "Gflops", "(no comm)", "MB/s"], rows
    )


def render(records: list[dict]) -> str:
    parts = [
        "<p>ct-qcd: SU(3) Wilson-action pure gauge, one Cabibbo-Marinari heat-bath pass "
        "(Kennedy-Pendleton) plus over-relaxation passes per sweep, even/odd, any process "
        "grid. QCDFlops = 5700 x heat-bath link updates / time (seeds/003's nominal "
        "constant; QCDMPI has no over-relaxation); 'counted' uses our own flop count per "
        "update and 'link upd/s' counts every pass (docs/qcd.md). Every run checks the "
        "cold-start plaquette (exactly 1), SU(3) to 1e-12, gauge invariance and every "
        "halo message's checksum.</p>",
        runs_table(records),
        ranktimes.section_part(records, "QCD"),
    ]
    groups = studies(records)
    if groups:
        parts += ["<h3>Which decomposition wins on which network</h3>", winners_table(groups)]
    for name, group in groups.items():
        p = group[0]["params"]
        same = study.series_identical(group)
        parts += [
            f"<h3>Decomposition study {esc(name)}: lattice "
            f"{run.dims_text(p['lattice'])}, {p['np']} processes"
            f"{' (oversubscribed: ranks share cores)' if p.get('oversubscribed') else ''}"
            f" on {esc(group[0]['meta']['cluster']['name'])}</h3>",
            study_table(group),
            study_figure(group),
            f"<p>plaquette series bitwise identical on every grid: "
            f"{'-' if same is None else 'yes' if same else 'NO'}</p>",
        ]
    findings = "".join(f"<p>{esc(text)}</p>" for text in paper()["findings"])
    series = series_figure(records)  # the physics check in detail: folded
    parts += [
        fold("plaquette series against the literature", series) if series else "",
        fold("seeds/003: tables 4 and 5, findings", paper_table() + findings),
    ]
    return "\n".join(p for p in parts if p)
