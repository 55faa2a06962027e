"""The Linpack level's report section: LU runs with % of peak, Gflops vs N and vs np,
per-phase bars, the GEMM rates per type, and the BLAS comparison (seeds/002 fig. 12)."""

from __future__ import annotations

from ... import ranktimes
from ...render import folded_table, pyplot, svg, table
from . import compare, jobs, run


def blas_key(record: dict, ranks: int | tuple[int, ...]) -> tuple:
    """What makes a DGEMM rate comparable with an LU: cluster, ranks computing (for a
    SUMMA product its grid and order), BLAS library and kernel."""
    lib = record["detail"].get("blas", {})
    return (record["meta"]["cluster"]["name"], ranks, lib.get("library"), lib.get("core"))


def best_dgemm(records: list[dict], mode: str, key) -> dict[tuple, float]:
    """Best verified double-precision ct-gemm rate of ``mode`` (local, summa) per
    ``key(record, sample)``."""
    best: dict[tuple, float] = {}
    for r in records:
        if r["kernel"] != "ct-gemm" or r["status"] != "ok":
            continue
        for s in r["samples"]:
            # square products only: a --k one (the update's shape, choice.py) is not the peak
            square = s.get("k", s.get("n")) == s.get("n")
            if s.get("dtype") == "d" and s.get("mode") == mode and s.get("passed") and square:
                k = key(r, s)
                best[k] = max(best.get(k, 0.0), s["gflops"])
    return best


def dgemm_peaks(records: list[dict]) -> dict[tuple, float]:
    """Best aggregate DGEMM rate (ct-gemm --local, verified) per blas_key."""
    return best_dgemm(records, "local", lambda r, s: blas_key(r, r["meta"]["np"]))


def summa_rates(records: list[dict]) -> dict[tuple, float]:
    """Best SUMMA DGEMM rate (verified) per blas_key of its P x Q grid and order."""
    return best_dgemm(records, "summa", lambda r, s: blas_key(r, (s["p"], s["q"], s["n"])))


def percent_of_peak(record: dict, sample: dict, peaks: dict[tuple, float]) -> float | None:
    """An LU rate as a percentage of the measured aggregate DGEMM rate of the same BLAS on
    as many ranks as the LU's P x Q grid (ranks launched beyond the grid do not compute)."""
    peak = peaks.get(blas_key(record, sample["p"] * sample["q"]))
    return 100.0 * sample["gflops"] / peak if peak else None


def summa_rate(record: dict, sample: dict, summas: dict[tuple, float]) -> float | None:
    """The SUMMA DGEMM rate of the same BLAS on the LU's cluster, grid and order."""
    return summas.get(blas_key(record, (sample["p"], sample["q"], sample["n"])))


def shared_cpus(record: dict) -> tuple[int, int] | None:
    """(ranks, CPUs) when a run's ranks outnumber the usable CPUs of the one machine they
    all ran on (this host, a virtual cluster or grid); None when each had a CPU, or when
    the record cannot say (ranks on other machines)."""
    meta = record["meta"]
    launchers = set(meta["cluster"].get("launcher", "").split(", "))
    ranks, cpus = meta.get("np"), (meta.get("cpus") or {}).get("usable")
    if not launchers <= set(jobs.ONE_MACHINE) or not ranks or not cpus or ranks <= cpus:
        return None
    return ranks, cpus


def lu_points(records: list[dict]) -> list[tuple[dict, dict]]:
    return [
        (r, s)
        for r in records
        if r["kernel"] == "ct-linpack"
        for s in r["samples"]
        if "variant" in s
    ]


def blas_text(record: dict) -> str:
    """The library a run loaded and the OpenBLAS core that ran (the kernel's own record),
    and how it was chosen: the host's measured default (choice.py) or named by the user."""
    lib = record["detail"].get("blas", {})
    name = lib.get("library", "").rsplit("/", 2)[-2:]
    text = "/".join(name) + (f" ({lib['core']})" if lib.get("core") else "")
    how = (record.get("params", {}).get("blas_choice") or {}).get("how")
    return text + {
        "measured": ", host default",
        "stored": ", host default",
        "named": ", named",
    }.get(how, "")


def trial(record: dict) -> bool:
    """A run of a tuner's search or of a BLAS comparison, not one of the level's own."""
    return bool(record["params"].get("tune") or record["params"].get("compare"))


def lu_table(records: list[dict], peaks: dict[tuple, float]) -> str:
    """Every LU result (a tuner's search adds dozens): the best, the failed and the best of
    the newest run of the level's own (the first screen's, with the BLAS it ran) in view,
    all of them in a fold."""
    points = lu_points(records)
    failed = [i for i, (_, s) in enumerate(points) if s["passed"] is not True]
    passed = [i for i, (_, s) in enumerate(points) if s["passed"] is True]
    shown = failed + ([max(passed, key=lambda i: points[i][1]["gflops"])] if passed else [])
    own = [i for i in passed if not trial(points[i][0])]
    if own:
        newest = points[own[-1]][0]["id"]
        mine = [i for i in own if points[i][0]["id"] == newest]
        shown.append(max(mine, key=lambda i: points[i][1]["gflops"]))
    rows = []
    for r, s in points:
        pct = percent_of_peak(r, s, peaks) if s["passed"] is True else None
        rows.append(
            [
                r["id"],
                s["variant"],
                s["n"],
                s["nb"],
                f"{s['p']}x{s['q']}",
                run.measured(s["passed"], s["time_s"], ".2f"),
                run.measured(s["passed"], s["gflops"], ".3f"),
                f"{pct:.1f}" if pct is not None else "-",
                run.residual_text(s["residual"]),
                run.verdict(s["passed"]),
                blas_text(r),
            ]
        )
    headers = [
        "run",
        "T/V",
        "N",
        "NB",
        "PxQ",
        "time s",
        "Gflops",
        "% of DGEMM",
        "residual",
        "check",
        "BLAS (core that ran)",
    ]
    return folded_table(headers, rows, shown, "LU results (best and failed above)")


def lu_figure(records: list[dict]) -> str:
    good = [(r, s) for r, s in lu_points(records) if s["passed"] is True]
    if not good:
        return ""
    plt = pyplot()
    fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(14, 3.6))
    for np_ in sorted({s["p"] * s["q"] for _, s in good}):
        pts = sorted((s["n"], s["gflops"]) for _, s in good if s["p"] * s["q"] == np_)
        ax1.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=f"np={np_}")
    ax1.set(xlabel="N", ylabel="Gflops", title="Gflops vs N")
    ax1.legend(fontsize="small")
    for n in sorted({s["n"] for _, s in good})[-4:]:  # the largest sizes
        best: dict[int, float] = {}
        for _, s in good:
            if s["n"] == n:
                best[s["p"] * s["q"]] = max(best.get(s["p"] * s["q"], 0.0), s["gflops"])
        pts = sorted(best.items())
        ax2.plot([x for x, _ in pts], [y for _, y in pts], "o-", label=f"N={n}")
    ax2.set(xlabel="ranks (P x Q)", ylabel="Gflops (best variant)", title="Gflops vs np")
    ax2.legend(fontsize="small")
    shown = [s for _, s in good][-6:]
    left = [0.0] * len(shown)
    labels = [f"{s['variant']} N={s['n']} {s['p']}x{s['q']}" for s in shown]
    for phase in jobs.PHASES:
        vals = [max(s["phases"].get(phase, [0.0])) for s in shown]
        ax3.barh(labels, vals, left=left, label=phase)
        left = [a + b for a, b in zip(left, vals, strict=True)]
    ax3.set(xlabel="seconds (max over ranks)", title="Per-phase breakdown")
    ax3.legend(fontsize="small", loc="lower right")
    fig.tight_layout()
    return svg(fig)


def gemm_table(records: list[dict]) -> str:
    """Every GEMM rate: the best DGEMM (the LU's reference) and the failed in view."""
    points = [
        (r, s)
        for r in records
        if r["kernel"] == "ct-gemm" and not r["params"].get("compare")
        for s in r["samples"]
    ]
    if not points:
        return ""
    rows = [
        [
            r["id"],
            s["dtype"],
            s["mode"],
            s["n"],
            f"{s['p']}x{s['q']}",
            r["meta"]["np"],
            run.measured(bool(s["passed"]), s["gflops"], ".3f"),
            run.verdict(bool(s["passed"])),
            blas_text(r),
        ]
        for r, s in points
    ]
    headers = ["run", "type", "mode", "N", "PxQ", "np", "Gflops", "check", "BLAS (core that ran)"]
    failed = [i for i, (_, s) in enumerate(points) if not s["passed"]]
    dgemm = [i for i, (_, s) in enumerate(points) if s["passed"] and s["dtype"] == "d"]
    shown = failed + ([max(dgemm, key=lambda i: points[i][1]["gflops"])] if dgemm else [])
    return "<h3>GEMM</h3>" + folded_table(
        headers, rows, shown, "GEMM results (best DGEMM and failed above)"
    )


def latest_comparison(records: list[dict]) -> list[dict]:
    batches = [r for r in records if r["params"].get("compare")]
    if not batches:
        return []
    last = batches[-1]["params"]["compare"]
    return [r for r in batches if r["params"]["compare"] == last]


def blas_section(records: list[dict]) -> str:
    batch = latest_comparison(records)
    if not batch:
        return ""
    rows = compare.rows(batch)
    table_rows = []
    for row in rows:
        pct = (
            f"{100 * row['lu_gflops'] / row['dgemm_gflops']:.1f}"
            if row["lu_gflops"] and row["dgemm_gflops"]
            else "-"
        )
        table_rows.append(
            [
                row["blas"],
                row["library"] or row["directory"],
                row["core"] or "-",
                f"{row['dgemm_gflops']:.2f}" if row["dgemm_gflops"] else "-",
                f"{row['lu_gflops']:.2f}" if row["lu_gflops"] else "-",
                pct,
                row["check"] or "FAILED",
                "; ".join(row["failed"]),
            ]
        )
    sizes = sorted({s["n"] for _, s in lu_points(batch)})
    parts = [
        f"<h3>BLAS libraries (np={batch[0]['meta']['np']}, LU N={sizes or '-'})</h3>",
        table(
            [
                "BLAS",
                "library",
                "kernel",
                "DGEMM Gflops",
                "LU Gflops",
                "% of DGEMM",
                "residual",
                "failed",
            ],
            table_rows,
        ),
    ]
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.4))
    xs = range(len(rows))
    width = 0.38
    ax.bar(
        [x - width / 2 for x in xs], [r["dgemm_gflops"] or 0 for r in rows], width, label="DGEMM"
    )
    ax.bar([x + width / 2 for x in xs], [r["lu_gflops"] or 0 for r in rows], width, label="LU")
    for x, r in zip(xs, rows, strict=True):
        if r["check"] != "PASSED":
            ax.annotate("failed", (x, 0), ha="center", va="bottom", color="red")
    ax.set_xticks(list(xs), [r["blas"] for r in rows])
    ax.set(ylabel="Gflops", title="DGEMM and LU per BLAS")
    ax.legend(fontsize="small")
    fig.tight_layout()
    parts.append(svg(fig))
    return "\n".join(parts)


def render(records: list[dict]) -> str:
    peaks = dgemm_peaks(records)
    lu = [r for r in records if r["kernel"] == "ct-linpack" and not r["params"].get("compare")]
    parts = []
    if lu:
        parts += ["<h3>LU (ct-linpack)</h3>", lu_table(lu, peaks), lu_figure(lu)]
    parts += [gemm_table(records), blas_section(records)]
    parts.append(ranktimes.section_part(records, "Linpack and GEMM"))
    return "\n".join(p for p in parts if p)
