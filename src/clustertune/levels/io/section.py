"""The I/O level's report section, after seeds/004 figures 3 and 4: open-to-close time
against the array size, write and read, collective and independent, one line per process
count, local beside remote; raw MPI-IO of the same bytes; the remote runs (client MPI,
forwarding mode, share of the inter-site link); and the table of minimums."""

from __future__ import annotations

from ...ceiling import above_ceiling, wire
from ...render import esc, folded_table, pyplot, svg
from ...units import format_rate
from . import LEVEL, netcdf

LINESTYLE = {"collective": "-", "independent": "--"}


def points(records: list[dict]) -> list[tuple[dict, dict]]:
    """(record, result) of every valid measurement of the level's kernels."""
    return [
        (r, x) for r in records if r["level"] == LEVEL.name for x in netcdf.results(r) if x["valid"]
    ]


def where(result: dict) -> str:
    return f"remote {result['remote']}" if result["remote"] else "local"


def figure(pts: list[tuple[dict, dict]]) -> str:
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), sharey=True)
    for ax, op in zip(axes, netcdf.OPS, strict=True):
        lines: dict[tuple, dict[int, float]] = {}
        for _, x in pts:
            if x["op"] != op:
                continue
            key = (x["variant"], where(x), x["mode"], x["np"])
            best = lines.setdefault(key, {})
            best[x["size"]] = min(best.get(x["size"], float("inf")), x["open_to_close_s_min"])
        for (variant, place, mode, np_), best in sorted(lines.items()):
            if variant == "raw":
                continue  # rawswap is the comparison that holds the format's byte order
            sizes = sorted(best)
            label = f"{variant} {place} {mode} np={np_}"
            ax.plot(
                sizes,
                [1e3 * best[s] for s in sizes],
                LINESTYLE[mode],
                marker="o",
                label=label,
                alpha=0.6 if variant == "rawswap" else 1.0,
            )
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="N (array N^3 ints)",
            ylabel="open-to-close ms (min)",
            title=f"{op}",
        )
        if ax.lines:  # an op may have no valid point (a run whose writes all failed)
            ax.legend(fontsize="x-small")
    fig.tight_layout()
    return svg(fig)


def forwarding(record: dict) -> str:
    """How a remote run was forwarded: the knobs of remote.py."""
    p = record["params"]
    parts = [
        f"{p.get('servers', '?')} server rank(s)",
        "metadata batched" if p.get("batch", True) else "per-call (paper)",
        f"session per {p.get('session', 'job')}",
    ]
    if "server_round" in p:
        r = p["server_round"]
        parts.append(
            "store-and-forward"
            if r == 0
            else f"rounds of {(r if r is not None else 4 << 20) / 2**20:g} MiB"
        )
    return ", ".join(parts)


def link_share(record: dict, share: float | None) -> str:
    """The share of the nominal inter-site link, and why when it is above the TCP payload
    that link can carry (issue 19: a 32^3 read at 147 % of 1gbit passed a tbf bucket)."""
    if not share:
        return "-"
    wan = record["figures"]["wan_bps"]
    why = above_ceiling(record, share * wan / 1e6, wan)
    return f"{share:.0%} of {format_rate(wan)}" + (f" ({why})" if why else "")


def remote_table(pts: list[tuple[dict, dict]]) -> str:
    """Remote runs: which client MPI talked to the OpenMPI + PnetCDF server, how, and the
    throughput as a share of the nominal inter-site link."""
    rows = []
    for r, x in pts:
        if not x["remote"] or x["variant"] != "netcdf":
            continue
        shares = r["figures"].get("link_share", {}).get(str(x["size"]), {})
        share = shares.get(x["op"]) if x["mode"] == "collective" else None
        rows.append(
            [
                r["id"],
                r["meta"]["cluster"]["name"],
                wire(r),
                x["remote"],
                r["meta"]["mpi"]["flavour"],
                forwarding(r),
                x["np"],
                x["size"],
                x["op"],
                x["mode"],
                f"{1e3 * x['open_to_close_s_min']:.2f}",
                f"{1e3 * x['open_to_close_s_median']:.2f}",
                f"{x['mbps']:.1f}",
                link_share(r, share),
            ]
        )
    if not rows:
        return ""
    headers = [
        "run",
        "cluster",
        "wire",
        "server at",
        "client MPI",
        "forwarding",
        "np",
        "N",
        "op",
        "mode",
        "open-close ms",
        "median",
        "MB/s",
        "link share",
    ]
    remote = folded_table(headers, rows, [], "remote results")
    return (
        "<h3>Remote collective I/O</h3><p>Client ranks on one site call PnetCDF's "
        "functions (libct_ncfwd, built for either MPI); ct-io-server (OpenMPI + PnetCDF) on "
        "the other site performs them, over mutual TLS. Link share: throughput over the "
        "open-to-close minimum against the nominal inter-site rate (target 80 % at "
        "256<sup>3</sup>).</p>" + remote
    )


def table(pts: list[tuple[dict, dict]]) -> str:
    rows = [
        [
            r["id"],
            r["meta"]["cluster"]["name"],
            where(x),
            r["detail"].get("mpiio_driver", "-"),
            x["np"],
            x["size"],
            f"{x['bytes'] / 2**20:.2f}",
            x["op"],
            x["mode"],
            x["variant"],
            x["format"],
            f"{1e3 * x['open_to_close_s_min']:.3f}",
            f"{1e3 * x['open_to_close_s_median']:.3f}",
            f"{1e3 * x['io_only_s_min']:.3f}",
            f"{x['mbps']:.1f}",
        ]
        for r, x in pts
    ]
    headers = [
        "run",
        "cluster",
        "where",
        "MPI-IO",
        "np",
        "N",
        "MiB",
        "op",
        "mode",
        "variant",
        "format",
        "open-close ms",
        "median",
        "I/O ms",
        "MB/s",
    ]
    # in view: each run's collective netCDF at its largest size (the summary's figure)
    largest: dict[int, int] = {}
    for r, x in pts:
        largest[r["id"]] = max(largest.get(r["id"], 0), x["size"])
    shown = [
        i
        for i, (r, x) in enumerate(pts)
        if x["size"] == largest[r["id"]] and x["variant"] == "netcdf" and x["mode"] == "collective"
    ]
    return folded_table(headers, rows, shown, "results per size (largest above)")


def render(records: list[dict]) -> str:
    mine = [r for r in records if r["level"] == LEVEL.name]
    if not mine:
        return ""
    pts = points(mine)
    failed = [r for r in mine if r["status"] != "ok"]
    parts = []
    if pts:
        parts += [figure(pts), remote_table(pts), table(pts)]
    if failed:
        parts.append(
            "<p>Failed or incomplete runs: "
            + ", ".join(
                f"{r['id']} ({esc((r['error'] or r['status']).splitlines()[0])})" for r in failed
            )
            + "</p>"
        )
    return "\n".join(parts)
