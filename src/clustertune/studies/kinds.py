"""The kinds of point a study step can run: each calls the Python API its level's command
calls (the same validation, the same stored record), with the study's values.

A kind runs one point on a cluster and returns the records it stored (one, usually). Its
``check`` refuses bad values when the study file is read, before anything runs.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..cluster import Cluster
from ..errors import UserError
from ..launch import mpi as mpi_flavours
from ..results import Store
from ..units import parse_size

Runner = Callable[..., list[dict]]  # (cluster, store, values, mpi[, rundir=])


@dataclass
class Kind:
    name: str
    level: str  # the records' level
    params: frozenset[str]
    run: Runner
    help: str
    expected: Callable[[dict], int] = lambda values: 1  # records one point stores
    check: Callable[[dict], object] = lambda values: None  # raises on bad values, at load
    rundir: bool = False  # run() also takes rundir=, the study's own directory
    sites: int = 1  # the sites its cluster needs


def _int(values: dict, key: str, default: int) -> int:
    value = values.get(key, default)
    if not isinstance(value, int) or isinstance(value, bool):
        raise UserError(f"{key}: expected an integer, got {value!r}")
    return value


def _pingpong(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from ..levels.network import pingpong

    a, b = pingpong.parse_between(cluster, v.get("between"))
    spec = pingpong.PingpongSpec(
        layer=v.get("layer", "tcp"),
        a=a,
        b=b,
        mode=v.get("mode", "pingpong"),
        mpi=mpi,
        max_size=parse_size(str(v.get("max_size", "8M"))),
        wait=v.get("wait", "block"),
        sockbuf=parse_size(str(v["sockbuf"])) if v.get("sockbuf") else None,
        timeout=v.get("timeout"),
        extra_args=tuple(v.get("extra_args", ())),
    )
    return [pingpong.run_pingpong(cluster, store, spec)]


TCP_BUFFER_VARS = {f.name: f.tcp_buffer_vars for f in mpi_flavours.FLAVOURS.values()}


def _tcp_buffer_env(mpi: str, size: object) -> dict[str, str]:
    """MPI's TCP socket buffers (seeds/000 table 4), send and receive alike."""
    if mpi not in TCP_BUFFER_VARS:
        raise UserError(f"tcp_buffer: no TCP socket buffer setting known for {mpi}")
    n = str(parse_size(str(size)))
    return dict.fromkeys(TCP_BUFFER_VARS[mpi], n)


def _linpack(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from ..levels.linpack import run

    v = dict(v)
    if "pq" in v:  # seeds/000 table 5: "2x4"
        text = str(v.pop("pq"))
        try:
            v["p"], v["q"] = (int(x) for x in text.lower().split("x"))
        except ValueError:
            raise UserError(f"pq: expected PxQ such as 2x4, got {text!r}") from None
    kargs: list[str] = []
    for key, flag in run.LIST_FLAGS.items():
        if key in v:
            kargs += [flag, str(v[key])]
    kargs += ["--seed", str(_int(v, "seed", 42)), "--hpl-out", "-"]
    env = _tcp_buffer_env(mpi, v["tcp_buffer"]) if "tcp_buffer" in v else None
    hosts = v.get("hosts")
    if hosts is not None:
        if not isinstance(hosts, list) or not hosts:
            raise UserError(f"hosts: expected a list of host names, got {hosts!r}")
        for host in hosts:
            cluster.host(host)
    record = run.run_linpack(
        cluster,
        store,
        _int(v, "np", 2),
        mpi,
        kargs,
        env=env,
        hosts=hosts,
        timeout=float(v.get("timeout", run.TIMEOUT_S)),
    )
    return [record]


def _gemm(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from ..levels.linpack import run

    np = _int(v, "np", 2)
    p = _int(v, "p", 1)
    kargs = run.gemm_args(
        str(v.get("n", 1000)),
        _int(v, "nb", 192),
        str(v.get("type", "sdcz")),
        _int(v, "repeat", 1),
        bool(v.get("local", False)),
        p,
        _int(v, "q", max(1, np // p)),
    )
    return [
        run.run_gemm(cluster, store, np, mpi, kargs, timeout=float(v.get("timeout", run.TIMEOUT_S)))
    ]


def _blas(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from ..levels.linpack import blas

    chosen = blas.select(v.get("blas"), blas.installed())
    return blas.compare(
        cluster,
        store,
        chosen,
        np=_int(v, "np", 2),
        mpi=mpi,
        n=_int(v, "n", 2000),
        nb=_int(v, "nb", 128),
        gemm_n=_int(v, "gemm_n", 1000),
    )


def _blas_count(v: dict) -> int:
    from ..levels.linpack import blas

    return 2 * len(blas.select(v.get("blas"), blas.installed()))


def _npb_args(v: dict) -> tuple[str, str, int]:
    """(benchmark, class, np), checked by the npb level's own checks when the file is read."""
    from ..levels.npb import run

    bench = str(v.get("benchmark", "ep")).lower()
    cls = str(v.get("class", "S")).upper()
    _field("benchmark", run.kernel_of, bench)
    _field("class", run.kernel_args, cls)
    return bench, cls, _positive(v, "np", 1)


def _npb(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from ..levels.npb import run

    return [run.run_npb(cluster, store, *_npb_args(v), mpi)]


def _qcd(cluster: Cluster, store: Store, v: dict, mpi: str) -> list[dict]:
    from ..levels.qcd import run, study

    np = _int(v, "np", 1)
    lattice = run.parse_dims(str(v.get("lattice", "8x8x8x8")), "lattice")
    if "dims" in v:
        dims = _int(v, "dims", 1)
        grid = study.decompositions(np, lattice, [dims]).get(dims)
    else:
        grid = run.default_grid(lattice, np)
    spec = run.QcdSpec(
        lattice=lattice,
        grid=grid,
        sweeps=_int(v, "sweeps", 4),
        or_steps=_int(v, "or_steps", 4),
        start="hot",
        seed=_int(v, "seed", 1),
    )
    extra = {"oversubscribed": study.oversubscribed(cluster, np)}
    return [run.run_qcd(cluster, store, spec, np=np, mpi=mpi, extra=extra)]


# "--sizes '..': ...", "--class: ...", "bad size '..': ..."
LEVEL_WORDING = re.compile(r"^(--[\w-]+:?|bad \w+) ")


def _field(key: str, parse: Callable, text: str):
    """A level parser's error (worded for its command line) re-worded for the study field."""
    try:
        return parse(text)
    except UserError as exc:
        raise UserError(f"{key}: {LEVEL_WORDING.sub('', str(exc))}") from None


def _choice(v: dict, key: str, default: str, choices: tuple[str, ...]) -> str:
    value = v.get(key, default)
    if value not in choices:
        raise UserError(f"{key}: expected one of {', '.join(choices)}, got {value!r}")
    return value


def _positive(v: dict, key: str, default: int) -> int:
    value = _int(v, key, default)
    if value < 1:
        raise UserError(f"{key}: must be at least 1, got {value}")
    return value


def _io_args(v: dict) -> dict:
    """The benchmark's arguments a local and a remote netCDF point share, checked with the io
    level's own parsers: ``netcdf.measure``'s keywords."""
    from ..levels.io import netcdf

    sizes = v.get("sizes", [16])
    sizes = ",".join(map(str, sizes if isinstance(sizes, list) else [sizes]))
    return {
        "np": _positive(v, "np", 2),
        "sizes": _field("sizes", netcdf.parse_sizes, sizes),
        "mode": _choice(v, "mode", "both", netcdf.MODES),
        "ops": _field("ops", netcdf.parse_ops, str(v.get("ops", "write,read"))),
        "fmt": _choice(v, "format", "cdf1", netcdf.FORMATS),
        "reps": _positive(v, "reps", 1),
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
    from ..levels.io import netcdf

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
        "servers": None if servers is None else _positive(v, "servers", 1),
        "batch": v.get("batch", True),
        "session": _choice(v, "session", "job", SESSIONS),
        "server_round": None if rounds is None else _field("server_round", parse_size, str(rounds)),
    }


def _netcdf_remote(cluster: Cluster, store: Store, v: dict, mpi: str, rundir: Path) -> list[dict]:
    """The io level's ``--remote SITE`` (default the last site): ct-io-server started on its
    first host for the point (and stopped after it), the client job on the other sites'
    hosts, the CA, certificates and grid-mapfile made once in the study's own directory."""
    from ..levels.io import netcdf

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


IO_PARAMS = frozenset({"np", "sizes", "mode", "ops", "format", "reps"})
KINDS: dict[str, Kind] = {
    k.name: k
    for k in (
        Kind(
            "pingpong",
            "network",
            frozenset(
                {"layer", "mode", "max_size", "wait", "sockbuf", "between", "timeout", "extra_args"}
            ),
            _pingpong,
            "net pingpong: one size sweep between two hosts",
        ),
        Kind(
            "linpack",
            "linpack",
            frozenset(
                {
                    "np",
                    "n",
                    "nb",
                    "p",
                    "q",
                    "pq",
                    "pfact",
                    "rfact",
                    "nbmin",
                    "ndiv",
                    "bcast",
                    "depth",
                    "seed",
                    "timeout",
                    "hosts",
                    "tcp_buffer",
                }
            ),
            _linpack,
            "linpack: ct-linpack (HPL-equivalent LU)",
        ),
        Kind(
            "gemm",
            "linpack",
            frozenset({"np", "n", "nb", "p", "q", "type", "repeat", "local", "timeout"}),
            _gemm,
            "gemm: ct-gemm in 1-4 types",
        ),
        Kind(
            "blas",
            "linpack",
            frozenset({"np", "n", "nb", "gemm_n", "blas"}),
            _blas,
            "blas compare: DGEMM and the LU with each installed BLAS",
            _blas_count,
        ),
        Kind(
            "npb",
            "npb",
            frozenset({"benchmark", "class", "np"}),
            _npb,
            "npb: EP, LU or BT of a class on np ranks",
            check=_npb_args,
        ),
        Kind(
            "qcd",
            "qcd",
            frozenset({"np", "lattice", "dims", "sweeps", "or_steps", "seed"}),
            _qcd,
            "qcd: ct-qcd, the decomposition of `dims` split directions",
        ),
        Kind(
            "netcdf",
            "io",
            IO_PARAMS | {"site"},
            _netcdf,
            "io netcdf: PnetCDF write/read on this cluster",
            check=_io_args,
        ),
        Kind(
            "netcdf_remote",
            "io",
            IO_PARAMS | {"site", "servers", "batch", "session", "server_round"},
            _netcdf_remote,
            "io netcdf --remote SITE: the calls forwarded to ct-io-server on another site",
            check=_remote_args,
            rundir=True,
            sites=2,
        ),
    )
}
