"""The network level's study step kind (clustertune.studies): a ping-pong size sweep."""

from __future__ import annotations

from ... import render, units
from ...cluster import Cluster
from ...results import Store
from ...studies import kinds


def _pingpong(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from . import pingpong

    a, b = pingpong.parse_between(cluster, v.get("between"))
    spec = pingpong.PingpongSpec(
        layer=v.get("layer", "tcp"),
        a=a,
        b=b,
        mode=v.get("mode", "pingpong"),
        mpi=mpi,
        max_size=units.parse_size(str(v.get("max_size", "8M"))),
        wait=v.get("wait", "block"),
        sockbuf=units.parse_size(str(v["sockbuf"])) if v.get("sockbuf") else None,
        timeout=v.get("timeout"),
        extra_args=tuple(v.get("extra_args", ())),
    )
    return [pingpong.run_pingpong(cluster, store, spec)]


def _throughput_plot(step_records: list[dict]) -> str:
    """Throughput against message size, a line per point."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.4, 4.0))
    ax = fig.add_subplot()
    ax.grid(True, which="both", alpha=0.3)
    for r in step_records:
        pts = [
            (s["size"], s["size"] * 8 / s["t_min_s"] / 1e6)
            for s in r["samples"]
            if s.get("size") and s.get("t_min_s")
        ]
        if pts:
            ax.plot(*zip(*pts, strict=True), marker=".", label=kinds.point_label(r))
    if not ax.lines:
        return ""
    ax.set_xscale("log")
    ax.set_xlabel("message size (bytes)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
    return render.svg(fig)


KINDS = (
    kinds.Kind(
        "pingpong",
        "network",
        frozenset(
            {"layer", "mode", "max_size", "wait", "sockbuf", "between", "timeout", "extra_args"}
        ),
        _pingpong,
        "net pingpong: one size sweep between two hosts",
        plots=_throughput_plot,
    ),
)
