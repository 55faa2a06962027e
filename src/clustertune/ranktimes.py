"""Each rank's CPU time beside its wall time: the rank lines every MPI kernel writes at
MPI_Finalize (kernels/common/ct_mpi.h), kept in a record's ``detail.rank_times``.

seeds/002 reports both for its runs, and the difference is the diagnosis. A rank of a
healthy job uses about one core all the time it runs (MPI spins while it waits), so the
ranks' CPU/wall ratios are alike: all near 1, or all lower together when the job has
more ranks than cores. A rank far below its peers waited without spinning or shared its
core with another process; one far above ran extra threads (a threaded BLAS).
"""

from __future__ import annotations

import statistics

from . import render as html

LOW = 2 / 3  # below this share of its peers' median CPU/wall: waited or shared its core
HIGH = 1.5  # above this multiple of its peers' median, and above ...
MANY_THREADS = 1.2  # ... this CPU/wall (more than one core): extra threads
MIN_GAP = 0.25  # of a core, at least, from the peers' median: on a machine loaded by
# other work every rank gets a few % of a core, and their ratios differ by noise alone
# (2 healthy ranks of EP.S at load 16: 0.040 and 0.060)
MIN_WALL_S = 0.2  # shorter runs: start-up and scheduling noise make up the ratio


def ratios(record: dict) -> list[tuple[int, str, float | None]]:
    """(rank, host, CPU/wall) per rank, rank order; None where the wall time is 0."""
    out = []
    for t in record.get("detail", {}).get("rank_times", []):
        ratio = t["cpu_s"] / t["wall_s"] if t.get("wall_s") and t.get("cpu_s") is not None else None
        out.append((t["rank"], t.get("host", ""), ratio))
    return out


def outliers(record: dict) -> list[tuple[int, str]]:
    """(rank, sentence) per rank whose CPU/wall is far from its peers' median."""
    times = record.get("detail", {}).get("rank_times", [])
    if len(times) < 2 or min(t.get("wall_s") or 0.0 for t in times) < MIN_WALL_S:
        return []
    found = []
    rows = ratios(record)
    for rank, host, ratio in rows:
        peers = [r for k, _, r in rows if k != rank and r is not None]
        if ratio is None or not peers:
            continue
        median = statistics.median(peers)
        if abs(ratio - median) < MIN_GAP:
            continue
        if ratio < LOW * median:
            why = "it waited without spinning or shared its core"
        elif ratio > HIGH * median and ratio > MANY_THREADS:
            why = "it ran more than one thread"
        else:
            continue
        where = f"rank {rank}" + (f" ({host})" if host else "")
        found.append((rank, f"{where}: CPU/wall {ratio:.2f}, its peers' {median:.2f}: {why}"))
    return found


def cell(record: dict) -> str:
    """The ratios for a table cell, rank order, a flagged rank marked with '!'."""
    flagged = {rank for rank, _ in outliers(record)}
    shown = [
        ("-" if r is None else f"{r:.2f}") + ("!" if rank in flagged else "")
        for rank, _, r in ratios(record)
    ]
    return " ".join(shown) or "-"


def text(record: dict) -> str:
    """Lines for a level's text: every rank's CPU and wall time, then any flagged rank."""
    times = record.get("detail", {}).get("rank_times", [])
    if not times:
        return ""
    per_rank = ", ".join(
        f"{t.get('rank')}: {t.get('cpu_s', 0):.2f}/{t.get('wall_s', 0):.2f} s" for t in times
    )
    lines = [f"  CPU/wall per rank ({cell(record)}): {per_rank}"]
    lines += [f"  CHECK {said}" for _, said in outliers(record)]
    return "\n".join(lines)


def section_part(records: list[dict], what: str) -> str:
    """A report section's table of CPU/wall per rank of its runs (the flagged in view),
    and one line per flagged rank."""
    timed = [r for r in records if r.get("detail", {}).get("rank_times")]
    if not timed:
        return ""
    rows, flagged, said = [], [], []
    for i, r in enumerate(timed):
        found = outliers(r)
        if found:
            flagged.append(i)
            said += [f"run {r['id']}: {sentence}" for _, sentence in found]
        times = r["detail"]["rank_times"]
        wall, cpu = max(t["wall_s"] for t in times), sum(t["cpu_s"] for t in times)
        rows.append([r["id"], r["kernel"], len(times), cell(r), f"{wall:.2f}", f"{cpu:.2f}"])
    headers = ["run", "kernel", "ranks", "CPU/wall per rank (rank order; ! far from peers)",
               "wall s (max)", "CPU s (sum)"]  # fmt: skip
    title = f"<h3>{html.esc(what)}: CPU time beside wall time, per rank</h3>"
    checks = "".join(f"<p><b>CHECK</b> {html.esc(s)}</p>" for s in said)
    table = html.folded_table(headers, rows, flagged, "CPU/wall per rank (flagged above)")
    return title + checks + table
