"""Graphs of the network level as SVG strings (NetPIPE's and seeds/002's graphs).

Each function takes one or more labelled curves, so overlays (TCP vs MPI vs PVM,
100 Mbit vs 1 Gbit) are the same call with more entries. Figures are built with
``matplotlib.figure.Figure`` (no pyplot state) and rendered by the report's
:func:`clustertune.render.svg`, which keeps text as text so reports can be searched and
tests can look for labels.
"""

from collections.abc import Collection, Mapping, Sequence

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ... import render
from ...units import payload_rate_bps
from .analysis import MBIT, Curve, dips, saturation_point_bytes

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


def _style(label: str, cut_short: Collection[str]) -> str:
    """A run whose sweep was cut short is dashed (its legend entry says so too)."""
    return "--" if label in cut_short else "-"


def _rate_lines(ax: Axes, nominal_bps: float | None) -> None:
    """The link's nominal rate and the TCP payload it can carry (units.payload_rate_bps),
    as horizontal lines: no curve of a paced wire may cross the lower one."""
    if nominal_bps:
        ax.axhline(
            nominal_bps / MBIT,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"nominal {nominal_bps / MBIT:.4g} Mbit/s",
        )
        payload = payload_rate_bps(nominal_bps) / MBIT
        ax.axhline(
            payload,
            color="grey",
            linestyle=":",
            linewidth=1,
            label=f"TCP payload ceiling {payload:.4g} Mbit/s",
        )


def throughput_svg(
    curves: Mapping[str, Curve],
    title: str = "Throughput graph",
    nominal_bps: float | None = None,
    cut_short: Collection[str] = (),
) -> str:
    """Throughput (Mbit/s) vs message size (bytes, log x); dips marked with red crosses;
    the link's nominal rate and payload ceiling when given."""
    _check(curves)
    fig, ax = _new(title, "message size (bytes)", "throughput (Mbit/s)")
    _rate_lines(ax, nominal_bps)
    dip_label = "throughput dips"  # one legend entry for the crosses of every curve
    for label, c in curves.items():
        pos = c.size > 0  # a 0-byte point has no place on a log axis
        ax.plot(
            c.size[pos],
            c.throughput_mbps[pos],
            _style(label, cut_short),
            marker=".",
            markersize=3,
            label=label,
        )
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
    return render.svg(fig)


def signature_svg(
    curves: Mapping[str, Curve],
    title: str = "Signature graph",
    nominal_bps: float | None = None,
    cut_short: Collection[str] = (),
) -> str:
    """NetPIPE's signature graph: throughput (Mbit/s) vs one-way time (s, log x).

    The first point's time is the latency, the top of the curve the bandwidth; the link's
    nominal rate and payload ceiling when given.
    """
    _check(curves)
    fig, ax = _new(title, "one-way time (s)", "throughput (Mbit/s)")
    _rate_lines(ax, nominal_bps)
    for label, c in curves.items():
        ax.plot(
            c.time_s,
            c.throughput_mbps,
            _style(label, cut_short),
            marker=".",
            markersize=3,
            label=label,
        )
    ax.set_xscale("log")
    _legend(ax)
    return render.svg(fig)


def saturation_svg(
    curves: Mapping[str, Curve],
    title: str = "Saturation graph",
    nominal_bps: float | None = None,
    cut_short: Collection[str] = (),
) -> str:
    """Saturation graph as in NetPIPE and seeds/002: size (bytes) vs one-way time (s), log-log.

    The saturation point of each curve is marked (as seeds/002's arrows) in the curve's
    colour and given in its legend entry, or "not determined" where its curve does not
    support one. With ``nominal_bps``, the size the nominal rate moves in each time (a
    line no curve reaches: its messages also pay the latency and the headers).
    """
    _check(curves)
    fig, ax = _new(title, "one-way time (s)", "message size (bytes)")
    if nominal_bps:
        times = np.geomspace(
            min(float(c.time_s.min()) for c in curves.values()),
            max(float(c.time_s.max()) for c in curves.values()),
            50,
        )
        ax.plot(
            times,
            times * nominal_bps / 8,
            color="black",
            linestyle="--",
            linewidth=1,
            label=f"nominal {nominal_bps / MBIT:.4g} Mbit/s",
        )
    for label, c in curves.items():
        pos = c.size > 0
        try:
            sat = saturation_point_bytes(c)
        except ValueError:
            sat = None
        note = "not determined" if sat is None else f"{sat:.0f} B"
        (line,) = ax.plot(
            c.time_s[pos],
            c.size[pos],
            _style(label, cut_short),
            marker=".",
            markersize=3,
            label=f"{label}: saturation point {note}",
        )
        if sat is not None:
            t_sat = float(np.interp(sat, c.size, c.time_s))
            ax.plot([t_sat], [sat], "v", color=line.get_color(), markersize=9)
    ax.set_xscale("log")
    ax.set_yscale("log")
    _legend(ax)
    return render.svg(fig)


def heatmap_svg(
    matrix: np.ndarray,
    hosts: Sequence[str],
    title: str,
    unit: str,
    colour: np.ndarray | None = None,
    scale: tuple[float, float | None] = (0.0, None),
    colour_label: str | None = None,
) -> str:
    """A host x host matrix as a heatmap with host labels and each value written in its cell.

    The cells are coloured by ``colour`` (default: the values themselves) on the fixed
    ``scale`` (low, high; high None: the largest value), never on the values' own
    min-max: a 0.1 % spread must not look like a fault. NaN (the diagonal, unmeasured
    pairs) is left blank.
    """
    values = np.asarray(matrix, dtype=float)
    shade = values if colour is None else np.asarray(colour, dtype=float)
    n = len(hosts)
    if values.shape != (n, n) or shade.shape != (n, n):
        raise ValueError(f"matrix shape {values.shape} does not match {n} hosts")
    finite = shade[np.isfinite(shade)]
    low = scale[0]
    # at least 1 above the low end: a matrix of zeros (no retransmission) still has a scale
    high = (
        scale[1]
        if scale[1] is not None
        else max(float(finite.max()) if finite.size else 0, low + 1)
    )
    fig = Figure(figsize=(1.2 + 0.9 * n, 0.8 + 0.8 * n))
    ax = fig.add_subplot()
    image = ax.imshow(np.ma.masked_invalid(shade), cmap="viridis", vmin=low, vmax=high)
    fig.colorbar(image, ax=ax, label=colour_label or unit)
    ax.set_xticks(range(n), labels=list(hosts), rotation=45, ha="right")
    ax.set_yticks(range(n), labels=list(hosts))
    ax.set_title(title)
    middle = (low + high) / 2
    for i in range(n):
        for j in range(n):
            if np.isfinite(values[i, j]):
                ax.text(
                    j,
                    i,
                    f"{values[i, j]:.4g}",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="black" if shade[i, j] > middle else "white",
                )
    return render.svg(fig)
