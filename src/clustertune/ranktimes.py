"""Each rank's CPU time beside its wall time: the rank lines every MPI kernel writes at
MPI_Finalize (kernels/common/ct_mpi.h), kept in a record's ``detail.rank_times``.

seeds/002 reports both for its runs, and the difference is the diagnosis. A rank of a
healthy job uses about one core all the time it is not waiting, so the ranks' CPU over
that time are alike: all near 1, or all lower together when the job has more ranks than
cores. The kernels' waits (ct_mpi_waitall) nap, so a rank that waits longer than its
peers has a low CPU/wall by design; its line carries ``wait_s``, its wall time in those
waits, and the low side is judged on CPU/(wall - wait_s) (records from before wait_s:
CPU/wall). A rank far below its peers there shared its core with another process; one
whose CPU/wall is far above ran extra threads (a threaded BLAS).
"""

from __future__ import annotations

import statistics

from . import render

LOW = 2 / 3  # below this share of its peers' median CPU/(wall - wait): shared its core
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


def busy_ratios(record: dict) -> list[tuple[int, float | None]]:
    """(rank, CPU/(wall - wait_s)) per rank, at most 1: the share of a core it had while
    not napping in a wait (CPU/wall without wait_s); None where that time is below
    MIN_WALL_S. The waits' own polling CPU stays in the numerator and can lift a long
    waiter above 1, which would make its healthy peers look low: hence the cap (extra
    threads are judged on CPU/wall). A long wait can thus hide a shared core, never
    make a healthy rank look low."""
    out = []
    for t in record.get("detail", {}).get("rank_times", []):
        busy = (t.get("wall_s") or 0.0) - (t.get("wait_s") or 0.0)
        ok = busy >= MIN_WALL_S and t.get("cpu_s") is not None
        out.append((t["rank"], min(t["cpu_s"] / busy, 1.0) if ok else None))
    return out


def _far(ratio: float | None, peers: list[float | None]) -> float | None:
    """The peers' median when ratio is at least MIN_GAP from it, else None."""
    known = [r for r in peers if r is not None]
    if ratio is None or not known:
        return None
    median = statistics.median(known)
    return median if abs(ratio - median) >= MIN_GAP else None


def outliers(record: dict) -> list[tuple[int, str]]:
    """(rank, sentence) per rank far from its peers' median: CPU/(wall - wait_s) below
    (shared core), or CPU/wall above (extra threads)."""
    times = record.get("detail", {}).get("rank_times", [])
    if len(times) < 2 or min(t.get("wall_s") or 0.0 for t in times) < MIN_WALL_S:
        return []
    waits = all("wait_s" in t for t in times)
    low_what = "CPU/(wall - wait)" if waits else "CPU/wall"
    found = []
    walls, busies = ratios(record), busy_ratios(record)
    for (rank, host, ratio), (_, busy) in zip(walls, busies, strict=True):
        where = f"rank {rank}" + (f" ({host})" if host else "")
        low = _far(busy, [b for k, b in busies if k != rank])
        high = _far(ratio, [r for k, _, r in walls if k != rank])
        if low is not None and busy < LOW * low:
            why = "it shared its core" if waits else "it waited without spinning or shared its core"
            found.append((rank, f"{where}: {low_what} {busy:.2f}, its peers' {low:.2f}: {why}"))
        elif high is not None and ratio > HIGH * high and ratio > MANY_THREADS:
            why = "it ran more than one thread"
            found.append((rank, f"{where}: CPU/wall {ratio:.2f}, its peers' {high:.2f}: {why}"))
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
        f"{t.get('rank')}: {t.get('cpu_s', 0):.2f}/{t.get('wall_s', 0):.2f} s"
        + (f" (waited {t['wait_s']:.2f} s)" if "wait_s" in t else "")
        for t in times
    )
    lines = [f"  CPU/wall per rank ({cell(record)}): {per_rank}"]
    lines += [f"  CHECK {said}" for _, said in outliers(record)]
    return "\n".join(lines)


def text_end(record: dict) -> list[str]:
    """The lines a level's text of one run ends with: the per-rank times (text), then
    the run's error if it has one."""
    lines = [times] if (times := text(record)) else []
    if record["error"]:
        lines.append(f"  error: {record['error']}")
    return lines


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
    headers = [
        "run",
        "kernel",
        "ranks",
        "CPU/wall per rank (rank order; ! far from peers)",
        "wall s (max)",
        "CPU s (sum)",
    ]
    title = f"<h3>{render.esc(what)}: CPU time beside wall time, per rank</h3>"
    checks = "".join(f"<p><b>CHECK</b> {render.esc(s)}</p>" for s in said)
    table = render.folded_table(headers, rows, flagged, "CPU/wall per rank (flagged above)")
    return title + checks + table
