"""The NPB level's report section: every run's NPB figures, Mop/s per process against the
rank count per benchmark and class (seeds/003 figures 3-6), the computation /
communication split per rank count (why LU scales worse than EP on a slow network), and
seeds/003's machines and findings beside them."""

from __future__ import annotations

from collections import defaultdict

from ... import ranktimes
from ...render import esc, fold, folded_table, pyplot, svg, table
from .paper import paper
from .run import failed


def runs(records: list[dict]) -> list[dict]:
    """Records with NPB figures (a failed launch has none)."""
    return [r for r in records if "benchmark" in r["figures"]]


def mpi_of(record: dict) -> str:
    mpi = record["meta"].get("mpi") or {}
    return mpi.get("flavour", "-") if isinstance(mpi, dict) else str(mpi)


def verdict(record: dict) -> str:
    return "SUCCESSFUL" if record["figures"].get("verified") else "UNSUCCESSFUL"


def comm_percent(figures: dict) -> str:
    """The slowest rank's time in communication as a share of the timed section: what
    separates EP (one reduction) from LU and BT (messages every plane or cell)."""
    t = figures.get("time_s") or 0.0
    return f"{100.0 * figures['comm_time_s'] / t:.0f}" if t > 0 else "-"


def measured(record: dict) -> list[str]:
    """A run's times, rates and traffic; a run that is not ok shows none of them."""
    f = record["figures"]
    if fail := failed(record):
        return [fail] * 3 + ["-"] * 5
    return [
        f"{f['time_s']:.3f}",
        f"{f['mops_total']:.1f}",
        f"{f['mops_per_process']:.1f}",
        f"{f['comp_time_s']:.3f}",
        f"{f['comm_time_s']:.3f}",
        comm_percent(f),
        f"{f['messages_per_iteration']:.0f}",
        f"{f['bytes_per_iteration']:.0f}",
    ]


def runs_table(records: list[dict]) -> str:
    rows = [
        [
            r["id"],
            r["figures"]["name"],
            mpi_of(r),
            r["meta"]["cluster"]["name"],
            *measured(r),
            verdict(r),
        ]
        for r in records
    ]
    headers = [
        "run",
        "NPB",
        "MPI",
        "cluster",
        "time s",
        "Mop/s",
        "Mop/s/process",
        "comp s (max)",
        "comm s (max)",
        "comm %",
        "msgs/iter",
        "bytes/iter",
        "verification",
    ]
    failed_rows = [
        i for i, r in enumerate(records) if failed(r) or not r["figures"].get("verified")
    ]
    return folded_table(headers, rows, failed_rows, "NPB runs (failed above)")


def series(records: list[dict]) -> dict[tuple, dict[int, float]]:
    """Best Mop/s per process of an ok (verified) run for each (benchmark.class, MPI,
    cluster) and np."""
    out: dict[tuple, dict[int, float]] = defaultdict(dict)
    for r in records:
        f = r["figures"]
        if failed(r) or not f.get("verified"):
            continue
        key = (f"{f['benchmark']}.{f['class']}", mpi_of(r), r["meta"]["cluster"]["name"])
        out[key][f["np"]] = max(out[key].get(f["np"], 0.0), f["mops_per_process"])
    return dict(out)


def comm_share(records: list[dict]) -> list[tuple[str, float, float]]:
    """(label, computation s, communication s) of the latest ok run per NPB name."""
    latest: dict[str, dict] = {}
    for r in records:
        if r["figures"].get("verified") and not failed(r):
            latest[f"{r['figures']['name']} {mpi_of(r)}"] = r
    return [
        (label, r["figures"]["comp_time_s"], r["figures"]["comm_time_s"])
        for label, r in sorted(latest.items())
    ]


def figure(records: list[dict]) -> str:
    lines = series(records)
    if not lines:
        return ""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.8))
    for (name, mpi, cluster), points in sorted(lines.items()):
        nps = sorted(points)
        ax1.plot(nps, [points[n] for n in nps], "o-", label=f"{name} {mpi} ({cluster})")
    ax1.set(
        xlabel="processes", ylabel="Mop/s per process", title="NPB: Mop/s per process", yscale="log"
    )
    ax1.set_xscale("log", base=2)
    ax1.legend(fontsize="x-small")
    bars = comm_share(records)[-12:]
    labels = [b[0] for b in bars]
    ax2.barh(labels, [b[1] for b in bars], label="computation")
    ax2.barh(labels, [b[2] for b in bars], left=[b[1] for b in bars], label="communication")
    ax2.set(xlabel="seconds (max over ranks)", title="Computation vs communication")
    ax2.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    return svg(fig)


def paper_part() -> str:
    data = paper()
    machines = [
        [
            m["machine"],
            m.get("processor", "-"),
            m.get("clock_mhz", "-"),
            m.get("pes", "-"),
            m.get("network", "-"),
            m.get("latency_us", "-"),
            m.get("mpi_max_throughput_mb_s", "-"),
            m.get("linpack_n100_mflops", "-"),
        ]
        for m in data["machines"]
    ]
    findings = [
        [f"{f['benchmark']}.{f['class']}", f["figure"], f["text"]] for f in data["findings"]
    ]
    return fold(
        "seeds/003: the paper's machines and NPB findings",
        "\n".join(
            [
                table(
                    [
                        "machine",
                        "CPU",
                        "MHz",
                        "PEs",
                        "network",
                        "MPI latency us",
                        "MPI MB/s (max)",
                        "Linpack n=100 Mflops",
                    ],
                    machines,
                ),
                table(["NPB", "paper figure", "finding"], findings),
                f"<p>{esc(data['note'])} Source: {esc(data['source'])}.</p>",
            ]
        ),
    )


def render(records: list[dict]) -> str:
    done = runs(records)
    parts = []
    if done:
        parts += [runs_table(done), figure(done), ranktimes.section_part(done, "NPB")]
    parts.append(paper_part())
    return "\n".join(p for p in parts if p)
