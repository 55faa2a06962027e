"""The grid level's rows of the report's first screen (clustertune.summary): seeds/000's
comparison, the same kernel across two sites against inside one, as ratios; the MPI
bandwidth across sites is also read against the nominal WAN rate."""

from __future__ import annotations

from ... import summary
from ..network.api import judge_bandwidth
from .compare import pairs


def linpack_row(p: dict) -> summary.Row:
    w, a = p.get("within_gflops"), p.get("across_gflops")
    row = summary.Row(
        f"Linpack N={p['n']} np={p['ranks']} across/within ({p['grid']})",
        f"{a or 0:.2f} vs {w or 0:.2f} Gflop/s",
        "inside one site",
        run=p.get("across_run"),
        value=a,
        unit="Linpack across sites",
        key=f"grid linpack {p['grid']} {p['mpi']}",
        state=summary.NONE,
    )
    if w and a:
        row.ratio = a / w
    else:
        row.figure, row.verdict, row.state = "one side has no result", "incomplete", summary.BAD
    return row


def times(ratio: float) -> str:
    """A ratio as "1.9x"; below 1 with two significant digits ("0.013x", never "0.0x":
    a within-site latency 76 times the across-site one must show)."""
    return f"{ratio:.1f}x" if ratio >= 1 else f"{ratio:.2g}x"


def pingpong_row(p: dict) -> summary.Row:
    lw, la = p.get("within_latency_us"), p.get("across_latency_us")
    bw, ba = p.get("within_bandwidth_mbps"), p.get("across_bandwidth_mbps")
    row = summary.Row(
        f"MPI {p['mode']} across/within ({p['grid']})",
        "",
        run=p.get("across_run"),
        value=ba,
        unit="bandwidth across sites",
        key=f"grid pingpong {p['grid']} {p['mpi']}",
    )
    if not (lw and la and bw and ba):
        row.figure, row.verdict, row.state = "one side has no result", "incomplete", summary.BAD
        return row
    row.figure = (
        f"latency {la:.1f} vs {lw:.1f} µs ({times(la / lw)}), bandwidth {ba:.0f} vs {bw:.0f} Mbit/s"
    )
    if p.get("wan_bps"):
        judge_bandwidth(row, ba, p["wan_bps"], "WAN")
    else:
        row.reference, row.ratio, row.state = "inside one site", ba / bw, summary.NONE
    return row


def rows(records: list[dict]) -> list[summary.Row]:
    return [linpack_row(p) if p["kernel"] == "linpack" else pingpong_row(p) for p in pairs(records)]
