"""The I/O level's study step kinds (clustertune.studies): netCDF on a cluster's site, and
forwarded to ct-io-server on another site."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from ... import render, units
from ...cluster import Cluster
from ...errors import UserError
from ...results import Store
from ...studies import kinds


def _io_args(v: dict) -> dict:
    """The benchmark's arguments a local and a remote netCDF point share, checked with the io
    level's own parsers: ``netcdf.measure``'s keywords."""
    from . import netcdf

    sizes = v.get("sizes", [16])
    sizes = ",".join(map(str, sizes if isinstance(sizes, list) else [sizes]))
    return {
        "np": kinds.positive(v, "np", 2),
        "sizes": kinds.reworded("sizes", netcdf.parse_sizes, sizes),
        "mode": kinds.choice(v, "mode", "both", netcdf.MODES),
        "ops": kinds.reworded("ops", netcdf.parse_ops, str(v.get("ops", "write,read"))),
        "fmt": kinds.choice(v, "format", "cdf1", netcdf.FORMATS),
        "reps": kinds.positive(v, "reps", 1),
    }


def _site(cluster: Cluster, v: dict, default: int) -> str:
    sites = [s.name for s in cluster.sites]
    site = v.get("site", sites[default])
    if site not in sites:
        raise UserError(
            f"site: {site!r} is not a site of cluster {cluster.name!r} ({', '.join(sites)})"
        )
    return site


def _netcdf(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    """On the hosts of one site (default the first: a remote step's clients)."""
    from . import netcdf

    site = _site(cluster, v, 0)
    hosts = [h.name for h in cluster.hosts if h.site == site]
    return [netcdf.measure(cluster, store, mpi=mpi, hosts=hosts, **_io_args(v))]


SESSIONS = ("job", "file")  # the level's --session: a TLS session per job, or per open/close
IDENTITY = "study"  # the client's certificate in the study's CA


def _remote_args(v: dict) -> dict:
    """The forwarding mode of a remote point (docs/io.md): ``netcdf.measure``'s keywords."""
    servers = v.get("servers")
    rounds = v.get("server_round")
    if not isinstance(v.get("batch", True), bool):
        raise UserError(f"batch: expected true or false, got {v['batch']!r}")
    return {
        **_io_args(v),
        "servers": None if servers is None else kinds.positive(v, "servers", 1),
        "batch": v.get("batch", True),
        "session": kinds.choice(v, "session", "job", SESSIONS),
        "server_round": None
        if rounds is None
        else kinds.reworded("server_round", units.parse_size, str(rounds)),
    }


def _netcdf_remote(cluster: Cluster, store: Store, v: dict, mpi: str, rundir: Path) -> list[dict]:
    """The io level's ``--remote SITE`` (default the last site): ct-io-server started on its
    first host for the point (and stopped after it), the client job on the other sites'
    hosts, the CA, certificates and grid-mapfile made once in the study's own directory."""
    from . import netcdf

    site = _site(cluster, v, -1)
    return [
        netcdf.measure(
            cluster,
            store,
            mpi=mpi,
            remote=site,
            ca_dir=rundir / "ca",
            identity=IDENTITY,
            **_remote_args(v),
        )
    ]


PARAMS = frozenset({"np", "sizes", "mode", "ops", "format", "reps"})
IO_TIMES = {"open_to_close_s": "open to close (fig. 3)", "io_only_s": "I/O call only (fig. 4)"}


def _time_plots(step_records: list[dict]) -> str:
    """The paper's figs. 3 and 4: netCDF time vs N, a line per op, mode and point values
    other than the size (local records' raw MPI-IO variants left out)."""
    from matplotlib.figure import Figure

    out = []
    for key, title in IO_TIMES.items():
        lines = defaultdict(dict)
        for r in step_records:
            for smp in r["samples"]:
                if smp.get("variant") == "netcdf" and key in smp:
                    label = f"{smp['op']} {smp['mode']} {kinds.point_label(r, skip='sizes')}"
                    lines[label][smp["size"]] = smp[key]["min"]
        if not lines:
            continue
        fig = Figure(figsize=(6.4, 4.0))
        ax = fig.add_subplot()
        ax.grid(True, which="both", alpha=0.3)
        for label, pts in sorted(lines.items()):
            xs = sorted(pts)
            ax.plot(xs, [pts[x] for x in xs], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N (N^3 ints)")
        ax.set_ylabel(f"time, min of reps (s): {title}")
        ax.legend(loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize="small")
        out.append(render.svg(fig))
    return "\n".join(out)


KINDS = (
    kinds.Kind(
        "netcdf",
        "io",
        PARAMS | {"site"},
        _netcdf,
        "io netcdf: PnetCDF write/read on this cluster",
        check=_io_args,
        plots=_time_plots,
    ),
    kinds.Kind(
        "netcdf_remote",
        "io",
        PARAMS | {"site", "servers", "batch", "session", "server_round"},
        _netcdf_remote,
        "io netcdf --remote SITE: the calls forwarded to ct-io-server on another site",
        check=_remote_args,
        rundir=True,
        sites=2,
        plots=_time_plots,
    ),
)
