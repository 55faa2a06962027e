"""The cluster model: which hosts exist, how to reach them, which launcher starts jobs.

A cluster comes from one of three places, chosen by ``--cluster``:
  * nothing given      -> this host alone, local launcher;
  * a TOML file        -> a real cluster (hostfile or slurm launcher), validated here;
  * a virtual cluster  -> the state a ``vcluster up`` left on disk.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from .errors import ConfigError, UserError
from .units import parse_rate

LAUNCHER_NAMES = ("local", "vcluster", "hostfile", "slurm")
MPI_FLAVOURS = ("openmpi", "mpich")
_HOST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")


@dataclass(frozen=True)
class Host:
    name: str
    address: str | None = None
    cores: int = 1
    site: str = "site0"
    link_bps: int | None = None  # nominal rate of the host's link; None = unshaped / unknown
    namespace: str | None = None  # network namespace behind a virtual host


@dataclass(frozen=True)
class Cluster:
    name: str
    launcher: str
    hosts: tuple[Host, ...]
    mpi: tuple[str, ...] = MPI_FLAVOURS
    source: str = "localhost"  # "localhost", "vcluster:<name>" or the TOML path
    wan_bps: int | None = None  # inter-site link of a multi-site cluster
    delay_us: int = 0
    extra: dict = field(default_factory=dict)  # launcher-specific settings (e.g. vcluster dirs)

    def host(self, name: str) -> Host:
        for host in self.hosts:
            if host.name == name:
                return host
        known = ", ".join(h.name for h in self.hosts)
        raise UserError(f"cluster {self.name!r} has no host {name!r} (hosts: {known})")

    @property
    def sites(self) -> list[str]:
        return sorted({h.site for h in self.hosts})


def local_cluster() -> Cluster:
    """This machine alone: ranks on localhost."""
    return Cluster(
        name="localhost",
        launcher="local",
        hosts=(Host(name=os.uname().nodename, address="127.0.0.1", cores=os.cpu_count() or 1),),
    )


def resolve_cluster(spec: str | None) -> Cluster:
    """``--cluster`` value -> Cluster: a file path, a virtual cluster name, or this host."""
    if not spec:
        return local_cluster()
    path = Path(spec)
    if path.suffix == ".toml" or path.is_file():
        return load_cluster_file(path)
    from . import vcluster  # local import: vcluster imports this module

    state = vcluster.load_state(spec)
    if state is not None:
        return vcluster.cluster_from_state(state)
    known = ", ".join(vcluster.names()) or "none is up"
    hint = "" if os.geteuid() == 0 else " (virtual clusters need root; without it use no --cluster)"
    raise UserError(
        f"--cluster {spec!r}: no such cluster file and no virtual cluster of that name "
        f"(virtual clusters: {known}){hint}"
    )


# --- TOML cluster files ----------------------------------------------------------------

_TOP_KEYS = {"name", "launcher", "mpi", "link", "hosts", "sites", "slurm"}
_HOST_KEYS = {"name", "address", "cores", "site", "link"}
_SITE_KEYS = {"name", "wan_link"}


class _LineFinder:
    """Maps a field of the parsed document back to its line: tomllib keeps no positions.

    It follows ``[[hosts]]`` / ``[[sites]]`` headers and ``key =`` lines, which is all a
    cluster file uses.
    """

    _HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")

    def __init__(self, text: str):
        self.lines: dict[tuple[str, int, str], int] = {}
        self.tables: dict[tuple[str, int], int] = {}
        table, index, counts = "", 0, {}
        for number, line in enumerate(text.splitlines(), start=1):
            if header := self._HEADER.match(line):
                table = header.group(1)
                index = counts.get(table, 0)
                counts[table] = index + 1
                self.tables[(table, index)] = number
            elif key := self._KEY.match(line):
                self.lines.setdefault((table, index, key.group(1)), number)

    def line(self, table: str, index: int, key: str | None = None) -> int | None:
        if key is not None and (table, index, key) in self.lines:
            return self.lines[(table, index, key)]
        return self.tables.get((table, index))


def load_cluster_file(path: Path) -> Cluster:
    name = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"{name}: cannot read cluster file: {exc.strerror}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise ConfigError(name, int(line.group(1)) if line else None, "syntax", str(exc)) from None
    where = _LineFinder(text)

    def fail(table: str, index: int, key: str, problem: str) -> ConfigError:
        label = f"{table}[{index}].{key}" if table else key
        return ConfigError(name, where.line(table, index, key), label, problem)

    for key in doc:
        if key not in _TOP_KEYS:
            raise fail("", 0, key, f"unknown field (known: {', '.join(sorted(_TOP_KEYS))})")
    launcher = doc.get("launcher", "hostfile")
    if launcher not in ("hostfile", "slurm", "local"):
        raise fail("", 0, "launcher", f"{launcher!r} is not one of hostfile, slurm, local")
    mpi = doc.get("mpi", list(MPI_FLAVOURS))
    if isinstance(mpi, str):
        mpi = [mpi]
    for flavour in mpi:
        if flavour not in MPI_FLAVOURS:
            raise fail("", 0, "mpi", f"{flavour!r} is not one of {', '.join(MPI_FLAVOURS)}")

    def rate(table: str, index: int, key: str, value) -> int | None:
        try:
            return parse_rate(str(value))
        except UserError as exc:
            raise fail(table, index, key, str(exc)) from None

    default_link = rate("", 0, "link", doc["link"]) if "link" in doc else None
    sites: dict[str, int | None] = {}
    for i, site in enumerate(doc.get("sites", [])):
        for key in site:
            if key not in _SITE_KEYS:
                raise fail(
                    "sites", i, key, f"unknown field (known: {', '.join(sorted(_SITE_KEYS))})"
                )
        if "name" not in site:
            raise fail("sites", i, "name", "missing")
        sites[site["name"]] = (
            rate("sites", i, "wan_link", site["wan_link"]) if "wan_link" in site else None
        )

    hosts: list[Host] = []
    raw_hosts = doc.get("hosts", [])
    if not raw_hosts:
        raise ConfigError(
            name, None, "hosts", "no [[hosts]] entries: a cluster needs at least one host"
        )
    for i, raw in enumerate(raw_hosts):
        for key in raw:
            if key not in _HOST_KEYS:
                raise fail(
                    "hosts", i, key, f"unknown field (known: {', '.join(sorted(_HOST_KEYS))})"
                )
        host_name = raw.get("name")
        if not isinstance(host_name, str) or not _HOST_NAME_RE.match(host_name):
            raise fail("hosts", i, "name", f"missing or not a host name: {host_name!r}")
        if any(h.name == host_name for h in hosts):
            raise fail("hosts", i, "name", f"host {host_name!r} appears twice")
        cores = raw.get("cores", 1)
        if not isinstance(cores, int) or isinstance(cores, bool) or cores < 1:
            raise fail("hosts", i, "cores", f"must be a positive integer, got {cores!r}")
        site = raw.get("site", next(iter(sites), "site0"))
        if sites and site not in sites:
            raise fail("hosts", i, "site", f"unknown site {site!r} (sites: {', '.join(sites)})")
        link = rate("hosts", i, "link", raw["link"]) if "link" in raw else default_link
        hosts.append(Host(host_name, raw.get("address"), cores, site, link))
    return Cluster(
        name=str(doc.get("name", path.stem)),
        launcher=launcher,
        hosts=tuple(hosts),
        mpi=tuple(mpi),
        source=str(path),
        wan_bps=min((r for r in sites.values() if r), default=None),
        extra={"slurm": doc.get("slurm", {})},
    )
