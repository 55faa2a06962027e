"""The cluster model: which hosts exist, how to reach them, which launcher starts jobs.

A cluster is hosts grouped into sites; each site names the launcher that starts ranks on
its hosts. Where a cluster comes from (``--cluster``) is :mod:`clustertune.sources`'
business; this module holds the model and reads TOML cluster files. It imports neither
the sources nor the launchers (both import it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from pathlib import Path

from . import tomlfile
from .errors import ConfigError, UserError
from .launch import mpi as mpi_flavours
from .units import parse_rate

DEFAULT_SITE = "site0"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.-]*$")  # a host's (and a grid site's) name


@dataclass(frozen=True)
class Host:
    name: str
    address: str | None = None
    cores: int = 1
    site: str = DEFAULT_SITE
    link_bps: int | None = None  # nominal rate of the host's link; None = unshaped / unknown
    namespace: str | None = None  # network namespace behind a virtual host


@dataclass(frozen=True)
class Site:
    name: str
    launcher: str  # a launcher's name (clustertune.launch.launchers)
    wan_bps: int | None = None  # the site's link to the other sites; None = unshaped / unknown
    settings: dict = field(default_factory=dict)  # the launcher's, e.g. {"partition": "debug"}


@dataclass(frozen=True)
class Cluster:
    name: str
    hosts: tuple[Host, ...]
    sites: tuple[Site, ...]
    mpi: tuple[str, ...] = mpi_flavours.NAMES  # the MPIs it offers
    source: str = "localhost"  # "localhost", "vcluster:<name>" or the TOML path
    delay_us: int = 0
    extra: dict = field(default_factory=dict)  # cluster-wide launcher plumbing (vcluster agent)
    # the hosts run on the same CPUs (a cluster file's ``shared_cpus = true``; virtual
    # clusters and grids always do): the network matrix then pins where a pair's ends run
    shared_cpus: bool = False

    def __post_init__(self):
        # Sources validate their input with better messages; this catches code that builds
        # a Cluster by hand with a host outside every site.
        names = [s.name for s in self.sites]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"cluster {self.name!r}: sites must be distinct and some: {names}")
        for host in self.hosts:
            if host.site not in names:
                raise ValueError(f"cluster {self.name!r}: host {host.name!r} is in no site")

    def host(self, name: str) -> Host:
        return self._named(self.hosts, "host", name)

    def site(self, name: str) -> Site:
        return self._named(self.sites, "site", name)

    def _named(self, items: tuple, kind: str, name: str):
        for item in items:
            if item.name == name:
                return item
        known = ", ".join(i.name for i in items)
        raise UserError(f"cluster {self.name!r} has no {kind} {name!r} ({kind}s: {known})")

    def launcher_of(self, host: str) -> str:
        return self.site(self.host(host).site).launcher

    @property
    def launcher(self) -> str:
        """The launcher shared by every site: one MPI launcher must start all ranks."""
        launchers = {s.launcher for s in self.sites}
        if len(launchers) == 1:
            return launchers.pop()
        per_site = ", ".join(f"{s.name}: {s.launcher}" for s in self.sites)
        raise UserError(
            f"cluster {self.name!r} has sites with different launchers ({per_site}): "
            "no one MPI launcher starts them all; run on one site at a time"
        )

    @property
    def wan_bps(self) -> int | None:
        """The slowest inter-site link, None when no site has one."""
        return min((s.wan_bps for s in self.sites if s.wan_bps), default=None)


def local_cluster() -> Cluster:
    """This machine alone: ranks on localhost."""
    return Cluster(
        name="localhost",
        hosts=(Host(name=os.uname().nodename, address="127.0.0.1", cores=os.cpu_count() or 1),),
        sites=(Site(DEFAULT_SITE, "local"),),
    )


# --- TOML cluster files ----------------------------------------------------------------

_TOP_KEYS = {"name", "launcher", "mpi", "link", "hosts", "sites", "slurm", "shared_cpus"}
HOST_KEYS = {"name", "address", "cores", "site", "link"}
_SITE_KEYS = {"name", "launcher", "wan_link"}
_SLURM_KEYS = {"partition"}


def load_cluster_file(path: Path, launchers: Collection[str]) -> Cluster:
    """Read and validate a cluster file; ``launchers`` are the launcher names it may use
    (the caller asks clustertune.launch.launchers: this module must not import it)."""
    name = str(path)
    doc, _, fail = tomlfile.read(path, "cluster file")

    def launcher(table: str, index: int, value) -> str:
        if not isinstance(value, str) or value not in launchers:
            raise fail(table, index, "launcher", f"{value!r} is not one of {', '.join(launchers)}")
        return value

    tomlfile.known(fail, "", 0, doc, _TOP_KEYS)
    default_launcher = launcher("", 0, doc.get("launcher", "hostfile"))
    mpi = tomlfile.choices(fail, "", 0, doc, "mpi", mpi_flavours.NAMES)
    slurm = tomlfile.typed(fail, "", 0, doc, "slurm", dict, {})
    tomlfile.known(fail, "slurm", 0, slurm, _SLURM_KEYS)
    tomlfile.typed(fail, "slurm", 0, slurm, "partition", str)

    def new_site(name: str, launcher_name: str, wan_bps: int | None = None) -> Site:
        # a launcher's settings are the top-level table named after it ([slurm])
        return Site(name, launcher_name, wan_bps, doc.get(launcher_name, {}))

    default_link = rate_field(fail, "", 0, doc, "link")
    sites: dict[str, Site] = {}
    for i, raw in enumerate(tomlfile.tables(fail, doc, "sites")):
        tomlfile.known(fail, "sites", i, raw, _SITE_KEYS)
        site_name = raw.get("name")
        if not isinstance(site_name, str):
            raise fail("sites", i, "name", f"missing or not a name: {site_name!r}")
        if site_name in sites:
            raise fail("sites", i, "name", f"site {site_name!r} appears twice")
        sites[site_name] = new_site(
            site_name,
            launcher("sites", i, raw.get("launcher", default_launcher)),
            rate_field(fail, "sites", i, raw, "wan_link"),
        )
    declared = bool(sites)
    default_site = next(iter(sites), DEFAULT_SITE)

    raw_hosts = tomlfile.tables(fail, doc, "hosts")
    if not raw_hosts:
        raise ConfigError(
            name, None, "hosts", "no [[hosts]] entries: a cluster needs at least one host"
        )

    def site_of(i: int, raw: dict) -> tuple[str, int | None]:
        host_site = tomlfile.typed(fail, "hosts", i, raw, "site", str, default_site)
        if declared and host_site not in sites:
            raise fail(
                "hosts", i, "site", f"unknown site {host_site!r} (sites: {', '.join(sites)})"
            )
        if host_site not in sites:  # without [[sites]], hosts name their sites freely
            sites[host_site] = new_site(host_site, default_launcher)
        return host_site, default_link

    hosts = load_hosts(fail, raw_hosts, site_of)
    shared_cpus = doc.get("shared_cpus", False)
    if not isinstance(shared_cpus, bool):
        raise fail("", 0, "shared_cpus", f"expected true or false, got {shared_cpus!r}")
    return Cluster(
        name=tomlfile.typed(fail, "", 0, doc, "name", str, path.stem),
        hosts=tuple(hosts),
        sites=tuple(sites.values()),
        mpi=tuple(mpi),
        source=str(path),
        shared_cpus=shared_cpus,
    )


def rate_field(
    fail: tomlfile.Fail, table: str, index: int, raw: dict, key: str, default: int | None = None
) -> int | None:
    """A rate field of a cluster file or grid description (``"100mbit"``; ``"unlimited"``
    is None), ``default`` when absent, a bad one the error naming its line."""
    if key not in raw:
        return default
    try:
        return parse_rate(str(raw[key]))
    except UserError as exc:
        raise fail(table, index, key, str(exc)) from None


def load_hosts(
    fail: tomlfile.Fail,
    raw_hosts: list[dict],
    site_of: Callable[[int, dict], tuple[str, int | None]],
) -> list[Host]:
    """The ``[[hosts]]`` tables of a cluster file or grid description, each field checked
    with an error naming its line. ``site_of(i, raw)`` is host i's site and the link of a
    host there that names none, or the reader's error for a site it does not know."""
    hosts: list[Host] = []
    for i, raw in enumerate(raw_hosts):
        tomlfile.known(fail, "hosts", i, raw, HOST_KEYS)
        host_name = raw.get("name")
        if not isinstance(host_name, str) or not NAME_RE.match(host_name):
            raise fail("hosts", i, "name", f"missing or not a host name: {host_name!r}")
        if any(h.name == host_name for h in hosts):
            raise fail("hosts", i, "name", f"host {host_name!r} appears twice")
        cores = tomlfile.typed(fail, "hosts", i, raw, "cores", int, 1)
        if cores < 1:
            raise fail("hosts", i, "cores", f"must be a positive integer, got {cores!r}")
        site, site_link = site_of(i, raw)
        link = rate_field(fail, "hosts", i, raw, "link", site_link)
        address = tomlfile.typed(fail, "hosts", i, raw, "address", str)
        hosts.append(Host(host_name, address, cores, site, link))
    return hosts
