"""Graphs of the network level as SVG strings (NetPIPE's and seeds/002's graphs).

Each function takes one or more labelled curves, so overlays (TCP vs MPI vs PVM,
100 Mbit vs 1 Gbit) are the same call with more entries. Figures are built with
``matplotlib.figure.Figure`` (no pyplot state) and rendered by the report's
:func:`clustertune.render.svg`, which keeps text as text so reports can be searched and
tests can look for labels.
"""

from collections.abc import Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ... import render as html
from .analysis import Curve, dips, saturation_point_bytes

_SIZE = (6.4, 4.2)


def _new(title: str, xlabel: str, ylabel: str) -> tuple[Figure, Axes]:
    fig = Figure(figsize=_SIZE)
    ax = fig.add_subplot()
    ax.set_title(title)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(True, which="both", alpha=0.3)
    return fig, ax


def _check(curves: Mapping[str, Curve]) -> None:
    if not curves:
        raise ValueError("nothing to plot: no curves given")


def _legend(ax: Axes) -> None:
    """The legend beside the axes, never over the curves, however many runs are drawn
    (the SVG grows to hold it)."""
    ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, fontsize="small")


def throughput_svg(curves: Mapping[str, Curve], title: str = "Throughput graph") -> str:
    """Throughput (Mbit/s) vs message size (bytes, log x); dips marked with red crosses."""
    _check(curves)
    fig, ax = _new(title, "message size (bytes)", "throughput (Mbit/s)")
    dip_label = "throughput dips"  # one legend entry for the crosses of every curve
    for label, c in curves.items():
        pos = c.size > 0  # a 0-byte point has no place on a log axis
        ax.plot(c.size[pos], c.throughput_mbps[pos], marker=".", markersize=3, label=label)
        found = dips(c)
        if found:
            ax.plot(
                [d["size"] for d in found],
                [d["throughput_mbps"] for d in found],
                "x",
                color="red",
                label=dip_label,
            )
            dip_label = "_nolegend_"
    ax.set_xscale("log")
    _legend(ax)
    return html.svg(fig)


def signature_svg(curves: Mapping[str, Curve], title: str = "Signature graph") -> str:
    """NetPIPE's signature graph: throughput (Mbit/s) vs one-way time (s, log x).

    The first point's time is the latency, the top of the curve the bandwidth.
    """
    _check(curves)
    fig, ax = _new(title, "one-way time (s)", "throughput (Mbit/s)")
    for label, c in curves.items():
        ax.plot(c.time_s, c.throughput_mbps, marker=".", markersize=3, label=label)
    ax.set_xscale("log")
    _legend(ax)
    return html.svg(fig)


def saturation_svg(curves: Mapping[str, Curve], title: str = "Saturation graph") -> str:
    """Saturation graph as in NetPIPE and seeds/002: size (bytes) vs one-way time (s), log-log.

    The saturation point of each curve is marked (as seeds/002's arrows) in the curve's
    colour and given in its legend entry, or "not determined" where its curve does not
    support one.
    """
    _check(curves)
    fig, ax = _new(title, "one-way time (s)", "message size (bytes)")
    for label, c in curves.items():
        pos = c.size > 0
        try:
            sat = saturation_point_bytes(c)
        except ValueError:
            sat = None
        note = "not determined" if sat is None else f"{sat:.0f} B"
        (line,) = ax.plot(c.time_s[pos], c.size[pos], marker=".", markersize=3,
                          label=f"{label}: saturation point {note}")  # fmt: skip
        if sat is not None:
            t_sat = float(np.interp(sat, c.size, c.time_s))
            ax.plot([t_sat], [sat], "v", color=line.get_color(), markersize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _legend(ax)
    return html.svg(fig)


def heatmap_svg(
    matrix: np.ndarray,
    hosts: Sequence[str],
    title: str,
    unit: str,
) -> str:
    """A host x host matrix as a heatmap with host labels and each value written in its cell.

    NaN (the diagonal, unmeasured pairs) is left blank.
    """
    values = np.asarray(matrix, dtype=float)
    n = len(hosts)
    if values.shape != (n, n):
        raise ValueError(f"matrix shape {values.shape} does not match {n} hosts")
    fig = Figure(figsize=(1.2 + 0.9 * n, 0.8 + 0.8 * n))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis")
    fig.colorbar(image, ax=ax, label=unit)
    ax.set_xticks(range(n), labels=list(hosts), rotation=45, ha="right")
    ax.set_yticks(range(n), labels=list(hosts))
    ax.set_title(title)
    finite = values[np.isfinite(values)]
    middle = (finite.min() + finite.max()) / 2 if finite.size else 0.0
    for i in range(n):
        for j in range(n):
            v = values[i, j]
            if np.isfinite(v):
                ax.text(
                    j,
                    i,
                    f"{v:.3g}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if v > middle else "white",
                )
    return html.svg(fig)
