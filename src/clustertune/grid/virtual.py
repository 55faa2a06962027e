"""A virtual grid: a virtual cluster with sites (clustertune.vcluster) plus a scheduler per site,
started inside that site's namespaces. ``up`` builds the cluster, then the site daemons;
``down`` stops the daemons, then removes the cluster; nothing is left behind.

State: /run/clustertune/grid/<name>/state.json, written before any daemon starts and
after each, so ``down`` stops what a crashed ``up`` had started. Each site has a
directory beside it (its Slurm config, munge key and socket, ssh keys, logs).

Schedulers: ``slurm`` (grid/slurm.py), ``ssh`` (grid/ssh.py: sshd on every host, the
site reached only with the grid's key), ``gram`` (grid/gram.py: a GCT GRAM5 gatekeeper
on the site's head in front of the fork job manager and of the site's own Slurm when
GCT's Slurm job manager is installed, GSI with the grid's own CA),
``none`` (the vcluster agent forks, as a site with no scheduler).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from .. import netns, vcluster
from ..errors import UserError
from ..vcluster import state as state_files
from . import daemons, gram, slurm, ssh

RUN_DIR = Path(os.environ.get("CLUSTERTUNE_RUN_DIR", "/run/clustertune")) / "grid"
SCHEDULERS = ("slurm", "ssh", "gram", "none")


def grid_dir(name: str) -> Path:
    return RUN_DIR / name


def names() -> list[str]:
    return state_files.saved_names(RUN_DIR)


def load(name: str) -> dict | None:
    return state_files.read(grid_dir(name))


def save(state: dict) -> None:
    state_files.write(grid_dir(state["name"]), state)


def parse_schedulers(text: str, sites: int) -> list[str]:
    """``slurm`` (every site) or ``site0=slurm,site1=ssh`` (unnamed sites: slurm)."""
    per_site = ["slurm"] * sites
    items = [i.strip() for i in text.split(",") if i.strip()]
    if len(items) == 1 and "=" not in items[0]:
        per_site = [items[0]] * sites
    else:
        for item in items:
            site, sep, value = item.partition("=")
            index = int(site[4:]) if site.startswith("site") and site[4:].isdigit() else -1
            if not sep or not 0 <= index < sites:
                raise UserError(
                    f"--scheduler {text!r}: expected NAME or siteK=NAME,... with "
                    f"siteK one of site0..site{sites - 1}"
                )
            per_site[index] = value.strip()
    for value in per_site:
        if value not in SCHEDULERS:
            raise UserError(f"--scheduler: {value!r} is not one of {', '.join(SCHEDULERS)}")
    return per_site


def plan(
    name: str,
    sites: int,
    hosts_per_site: int,
    schedulers: list[str],
    link_bps: int | None,
    wan_bps: int | None,
    delay_us: int = 0,
    wire: str = vcluster.DEFAULT_WIRE,
) -> tuple[dict, dict]:
    """(the virtual cluster's plan, the grid's state): pure, checked before anything runs.
    ``wire``: the hosts' link model (vcluster.WIRES)."""
    if not 1 <= hosts_per_site <= 50:
        raise UserError(f"--hosts-per-site {hosts_per_site}: must be between 1 and 50")
    # vcluster.plan's limits, worded for this command's options (it would say --hosts)
    if not 1 <= sites <= 50:
        raise UserError(f"--sites {sites}: must be between 1 and 50")
    if sites * hosts_per_site > 200:
        raise UserError(
            f"--sites {sites} x --hosts-per-site {hosts_per_site}: a virtual grid "
            "has at most 200 hosts"
        )
    cplan = vcluster.plan(
        name,
        sites * hosts_per_site,
        link_bps,
        sites=sites,
        wan_bps=wan_bps,
        delay_us=delay_us,
        wire=wire,
    )
    d = grid_dir(name)
    site_list = []
    for k, scheduler in enumerate(schedulers):
        hosts = [
            {key: h[key] for key in ("name", "address", "namespace")}
            for h in cplan["hosts"]
            if h["site_index"] == k
        ]
        site_list.append(
            {
                "name": f"site{k}",
                "scheduler": scheduler,
                "hosts": hosts,
                "head": hosts[0]["name"],
                "dir": str(d / f"site{k}"),
                "pids": {},
                "contact": contact(scheduler, hosts[0]),
            }
        )
    state = {
        "name": name,
        "status": "building",
        "dir": str(d),
        "sites": site_list,
        "origin": cplan["hosts"][0]["name"],
        "link_bps": link_bps,
        "wan_bps": wan_bps,
        "wire": wire,
        "created": time.time(),
    }
    return cplan, state


def contact(scheduler: str, head: dict) -> str:
    if scheduler == "gram":
        return gram.contact(head)
    port = {"slurm": slurm.CTLD_PORT, "ssh": ssh.PORT}.get(scheduler)
    return f"{head['name']}:{port}" if port else head["name"]


def up(cplan: dict, state: dict, timeout: float = 30.0) -> dict:
    """Build the virtual cluster, then every site's scheduler; on failure remove all."""
    vcluster.require_root()
    name = state["name"]
    old = load(name)
    if old is not None and old.get("status") == "up" and name in vcluster.names():
        raise UserError(f"grid {name!r} is already up; run 'clustertune grid down --name {name}'")
    down(name)
    save(state)
    try:
        vcluster.up(cplan)
        for site in state["sites"]:
            Path(site["dir"]).mkdir(parents=True, exist_ok=True)
            try:
                if site["scheduler"] == "gram" and gram.fronts_slurm():
                    site["lrm"] = "slurm"  # the gatekeeper in front of the site's Slurm too
                if site["scheduler"] == "slurm" or site.get("lrm") == "slurm":
                    slurm.start(name, site, timeout)
                if site["scheduler"] == "ssh":
                    ssh.start(name, site, timeout)
                elif site["scheduler"] == "gram":
                    gram.start(name, site, timeout)
            finally:
                save(state)
    except BaseException:
        down(name)
        raise
    state["status"] = "up"
    save(state)
    return state


def down(name: str) -> bool:
    """Stop the daemons, remove the virtual cluster and the grid's files. Idempotent;
    True if there was anything to remove."""
    vcluster.require_root()
    vcluster.validate_name(name)
    state = load(name)
    sites = (state or {}).get("sites", [])
    pids = [p for s in sites for p in [*s.get("pids", {}).values(), *gram.stray(s)]]
    found = bool(state) or bool(daemons.marked(name))
    daemons.stop_grid(name, pids)
    found = vcluster.down(name) or found
    if grid_dir(name).exists():
        shutil.rmtree(grid_dir(name))
        found = True
    return found


def leftovers(name: str) -> list[str]:
    """What of grid ``name`` still exists (processes, namespaces, files): [] after down."""
    state = load(name) or {}
    left = [f"process {p}" for p in daemons.marked(name)]
    left += [f"process {p} (GRAM)" for s in state.get("sites", []) for p in gram.stray(s)]
    left += [f"namespace {ns}" for ns in netns.listed() if ns.startswith(vcluster.prefix(name))]
    left += [str(p) for p in (grid_dir(name), vcluster.state_dir(name)) if p.exists()]
    left += [str(p) for p in netns.NETNS_ETC.glob(f"{vcluster.prefix(name)}*")]
    return left


def healthy(state: dict) -> dict[str, list[str]]:
    """Per site, the daemons that are not running (empty lists: all well)."""
    return {
        s["name"]: [what for what, pid in s["pids"].items() if not daemons.alive(pid)]
        for s in state["sites"]
    }


def set_wan(name: str, site: str, up: bool) -> None:
    """Fault injection: cut (``up=False``) or restore a site's link to the WAN (both ends
    of the veth pair between the site's bridge and the WAN bridge)."""
    cstate = vcluster.load_state(name)
    if cstate is None or cstate.get("sites", 1) < 2:
        raise UserError(f"grid {name!r} has no WAN")
    k = site.removeprefix("site")
    if not k.isdigit() or int(k) >= cstate["sites"]:
        raise UserError(f"grid {name!r} has no site {site!r}")
    for dev in (f"s{k}w", f"w{k}s"):
        netns.run("ip", "-n", cstate["switch_ns"], "link", "set", dev, "up" if up else "down")
