"""A grid description: a TOML file naming the sites, each with its hosts, scheduler and
contact, and the links between sites. The same file describes a real multi-site setup;
``--cluster FILE.grid.toml`` reads it (the grid level's manifest names :class:`GridFile` among its cluster sources).

    name = "two-campuses"
    mpi = ["openmpi", "mpich"]

    [[sites]]
    name = "hongo"
    scheduler = "slurm"            # slurm | ssh | gram | none
    contact = "login.hongo:6817"   # where the scheduler is reached (gram: host:port[:subject])
    link = "1gbit"                 # hosts' links inside the site

    [[hosts]]
    name = "h1"
    site = "hongo"
    address = "10.0.0.1"
    cores = 2

    [[links]]
    sites = ["hongo", "kashiwa"]
    rate = "100mbit"
    delay_us = 500

Errors name file:line:field (clustertune.errors.ConfigError), before anything runs. Each
site's launcher follows from its scheduler (slurm: the slurm launcher; ssh, gram and
none: the hostfile launcher over ssh: GRAM submits jobs, it starts no MPI daemons on a
real site) unless the site names one.
"""

from __future__ import annotations

from pathlib import Path

from .. import tomlfile
from ..cluster import NAME_RE, Cluster, Site, load_hosts, rate_field
from ..errors import ConfigError
from ..launch import mpi as mpi_flavours

SCHEDULERS = ("slurm", "ssh", "gram", "none")
LAUNCHER_OF = {"slurm": "slurm", "ssh": "hostfile", "gram": "hostfile", "none": "hostfile"}
_TOP = {"name", "mpi", "sites", "hosts", "links"}
_SITE = {"name", "scheduler", "contact", "link", "launcher", "partition"}
_LINK = {"sites", "rate", "delay_us"}
SUFFIX = ".grid.toml"


def load_grid_file(path: Path) -> Cluster:
    name = str(path)
    doc, where, fail = tomlfile.read(path, "grid description")

    tomlfile.known(fail, "", 0, doc, _TOP)
    mpi = tomlfile.choices(fail, "", 0, doc, "mpi", mpi_flavours.NAMES)
    raw_sites = tomlfile.tables(fail, doc, "sites")
    if not raw_sites:
        raise ConfigError(name, None, "sites", "no [[sites]] entries: a grid needs a site")
    sites: dict[str, dict] = {}
    for i, raw in enumerate(raw_sites):
        tomlfile.known(fail, "sites", i, raw, _SITE)
        site_name = raw.get("name")
        if not isinstance(site_name, str) or not NAME_RE.match(site_name):
            raise fail("sites", i, "name", f"missing or not a name: {site_name!r}")
        if site_name in sites:
            raise fail("sites", i, "name", f"site {site_name!r} appears twice")
        scheduler = raw.get("scheduler", "slurm")
        if scheduler not in SCHEDULERS:
            raise fail(
                "sites", i, "scheduler", f"{scheduler!r} is not one of {', '.join(SCHEDULERS)}"
            )
        contact = tomlfile.typed(fail, "sites", i, raw, "contact", str)
        if scheduler != "none" and contact is None:
            raise fail("sites", i, "contact", f"a {scheduler} site needs its contact (host[:port])")
        partition = tomlfile.typed(fail, "sites", i, raw, "partition", str)
        sites[site_name] = {
            "index": i,
            "scheduler": scheduler,
            "contact": contact,
            "link": rate_field(fail, "sites", i, raw, "link"),
            "launcher": tomlfile.typed(
                fail, "sites", i, raw, "launcher", str, LAUNCHER_OF[scheduler]
            ),
            "settings": {} if partition is None else {"partition": partition},
            "wan": None,
        }

    def site_of(i: int, raw: dict) -> tuple[str, int | None]:
        site_name = raw.get("site")
        if site_name not in sites:
            raise fail("hosts", i, "site", f"{site_name!r} is not a site ({', '.join(sites)})")
        return site_name, sites[site_name]["link"]

    hosts = load_hosts(fail, tomlfile.tables(fail, doc, "hosts"), site_of)
    empty = [s for s in sites if not any(h.site == s for h in hosts)]
    if empty:
        line = where.line("sites", sites[empty[0]]["index"], "name")
        raise ConfigError(name, line, "hosts", f"site {empty[0]!r} has no [[hosts]]")
    links = []
    for i, raw in enumerate(tomlfile.tables(fail, doc, "links")):
        tomlfile.known(fail, "links", i, raw, _LINK)
        pair = raw.get("sites")
        if not (
            isinstance(pair, list)
            and len(pair) == 2
            and all(p in sites for p in pair)
            and pair[0] != pair[1]
        ):
            raise fail(
                "links", i, "sites", f"expected two different sites of the grid, got {pair!r}"
            )
        if "rate" not in raw:
            raise fail("links", i, "rate", 'missing (e.g. rate = "100mbit")')
        bps = rate_field(fail, "links", i, raw, "rate")
        delay = tomlfile.typed(fail, "links", i, raw, "delay_us", int, 0)
        if delay < 0:
            raise fail("links", i, "delay_us", f"must be a non-negative integer, got {delay!r}")
        links.append({"sites": pair, "rate_bps": bps, "delay_us": delay})
        for p in pair:
            if bps is not None:
                wan = sites[p]["wan"]
                sites[p]["wan"] = bps if wan is None else min(wan, bps)
    return Cluster(
        name=tomlfile.typed(fail, "", 0, doc, "name", str, path.name.removesuffix(SUFFIX)),
        hosts=tuple(hosts),
        sites=tuple(
            Site(
                n,
                s["launcher"],
                s["wan"],
                {**s["settings"], "scheduler": s["scheduler"], "contact": s["contact"]},
            )
            for n, s in sites.items()
        ),
        mpi=tuple(mpi),
        source=str(path),
        extra={"links": links},
    )


class GridFile:
    """``--cluster PATH.grid.toml``: a grid description (ahead of plain cluster files)."""

    name = "grid-file"

    def claims(self, spec: str | None) -> bool:
        return bool(spec) and spec.endswith(SUFFIX)

    def resolve(self, spec: str) -> Cluster:
        return load_grid_file(Path(spec))

    def not_found(self) -> str:
        return ""
