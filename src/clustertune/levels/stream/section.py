"""The STREAM level's report section: every run's rates (the whole job's, and each rank's
mean: hpcc's StarSTREAM figure), the bandwidth of each loop against the rank count per
cluster and MPI (memory shared by more ranks: where it stops growing is the host's
bandwidth), and each host's share in runs over several hosts. A run that is not ok shows
FAILED where its rates would be."""

from __future__ import annotations

from collections import defaultdict

from ... import ranktimes
from ...render import folded_table, pyplot, svg
from .run import LOOPS, failed, in_cache, samples_by_loop


def runs(records: list[dict]) -> list[dict]:
    """Records of ct-stream that got as far as sizing their arrays (a failed launch has
    no figures)."""
    return [r for r in records if "n" in r["figures"]]


def mpi_of(record: dict) -> str:
    mpi = record["meta"].get("mpi") or {}
    return mpi.get("flavour", "-") if isinstance(mpi, dict) else str(mpi)


def series_key(record: dict) -> tuple[str, str]:
    return record["meta"]["cluster"]["name"], mpi_of(record)


def rates(record: dict) -> list[str]:
    """Copy, Scale, Add, Triad of the whole job and Triad per rank, GB/s; FAILED for a
    run that is not ok."""
    f = record["figures"]
    if fail := failed(record):
        return [fail] * 5
    return [f"{f[f'{loop}_gb_s']:.2f}" for loop in LOOPS] + [f"{f['triad_rank_gb_s']:.2f}"]


def runs_table(done: list[dict]) -> str:
    rows = [
        [
            r["id"],
            r["meta"]["cluster"]["name"],
            mpi_of(r),
            r["figures"]["ranks"],
            r["figures"]["hosts"],
            f"{r['figures']['array_bytes'] / 2**20:.0f}",
            f"{r['figures']['arrays_over_llc']:.1f}",
            *rates(r),
            r["verification"],
            "" if failed(r) else in_cache(r["figures"]) or "",
        ]
        for r in done
    ]
    headers = [
        "run",
        "cluster",
        "MPI",
        "ranks",
        "hosts",
        "MiB per array and rank",
        "x last-level cache",
        "Copy GB/s",
        "Scale GB/s",
        "Add GB/s",
        "Triad GB/s",
        "Triad GB/s per rank (mean)",
        "verification",
        "note",
    ]
    bad = [i for i, r in enumerate(done) if failed(r) or in_cache(r["figures"])]
    return folded_table(headers, rows, bad, "STREAM runs (failed and in-cache above)")


def by_ranks(done: list[dict], cache_too: bool = False) -> dict[tuple[str, str], dict[int, dict]]:
    """Per (cluster, MPI) and rank count, the best of the ok runs' figures per key (the
    whole job's rate of each loop and Triad per rank); runs whose arrays fit in the caches
    only with ``cache_too`` (their rates are not the memory's)."""
    out: dict[tuple[str, str], dict[int, dict]] = defaultdict(dict)
    for r in done:
        if failed(r) or (in_cache(r["figures"]) and not cache_too):
            continue
        f = r["figures"]
        best = out[series_key(r)].setdefault(f["ranks"], {})
        for key in [f"{loop}_gb_s" for loop in LOOPS] + ["triad_rank_gb_s"]:
            best[key] = max(best.get(key, 0.0), f[key])
    return dict(out)


def figure(done: list[dict]) -> str:
    lines = by_ranks(done)
    if not lines:
        return ""
    plt = pyplot()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 3.8))
    for (cluster, mpi), points in sorted(lines.items()):
        nps = sorted(points)
        for loop in LOOPS:
            ax1.plot(
                nps,
                [points[n][f"{loop}_gb_s"] for n in nps],
                "o-",
                label=f"{loop.capitalize()} {mpi} ({cluster})",
            )
        ax2.plot(nps, [points[n]["triad_rank_gb_s"] for n in nps], "o-", label=f"{mpi} ({cluster})")
    ax1.set(xlabel="ranks", ylabel="GB/s (all ranks)", title="STREAM: bandwidth against ranks")
    ax2.set(xlabel="ranks", ylabel="GB/s per rank (mean)", title="Triad per rank")
    for ax in (ax1, ax2):
        ax.set_ylim(bottom=0)
        ax.legend(fontsize="x-small")
    fig.tight_layout()
    return svg(fig)


def hosts_table(done: list[dict]) -> str:
    """Each host's own rates (its ranks' bytes over its slowest rank's time) in the ok runs
    over several hosts: a host whose memory is slower, or shared with other work, shows."""
    rows = []
    for r in done:
        if failed(r) or r["figures"]["hosts"] < 2:
            continue
        loops = samples_by_loop(r)
        for i, h in enumerate(loops["triad"]["per_host"]):
            host_rates = [f"{loops[loop]['per_host'][i]['gb_s']:.2f}" for loop in LOOPS]
            rows.append([r["id"], r["meta"]["cluster"]["name"], h["host"], h["ranks"], *host_rates])
    if not rows:
        return ""
    headers = ["run", "cluster", "host", "ranks on it", *(f"{x.capitalize()} GB/s" for x in LOOPS)]
    return "<h3>Per host</h3>" + folded_table(headers, rows, [], "hosts of the runs")


def render(records: list[dict]) -> str:
    done = runs(records)
    if not done:
        return ""
    parts = [runs_table(done), figure(done), hosts_table(done)]
    parts.append(ranktimes.section_part(done, "STREAM"))
    return "\n".join(p for p in parts if p)
