"""A virtual cluster as the rest of clustertune sees it: the :class:`Cluster` its state
describes, the ``--cluster NAME`` source that finds it, and the command line that runs
a command on one of its hosts."""

from __future__ import annotations

import os
import shlex

from ..cluster import Cluster, Host, Site
from .planning import DEFAULT_WIRE
from .state import load_state, names, state_dir


def cluster_from_state(state: dict) -> Cluster:
    hosts = tuple(
        Host(
            name=h["name"],
            address=h["address"],
            cores=h["cores"],
            site=h["site"],
            link_bps=h["link_bps"],
            namespace=h["namespace"],
        )
        for h in state["hosts"]
    )
    # every site has hosts (contiguous blocks), so the hosts name all of them, in order
    site_names = dict.fromkeys(h.site for h in hosts)
    return Cluster(
        name=state["name"],
        hosts=hosts,
        sites=tuple(Site(name, "vcluster", state["wan_bps"]) for name in site_names),
        source=f"vcluster:{state['name']}",
        delay_us=state["delay_us"],
        extra={
            "agent": state["agent"],
            "state_dir": str(state_dir(state["name"])),
            "wire": state.get("wire", DEFAULT_WIRE),
            # per host and per link ("hostA-hostB"), as `vcluster set` last left them
            "faults": {h["name"]: h["faults"] for h in state["hosts"] if h.get("faults")}
            | state.get("link_faults", {}),
        },
    )


class Source:
    """``--cluster NAME``: a virtual cluster that ``vcluster up`` left on disk (see
    :mod:`clustertune.sources`, which registers it; this module must not import that)."""

    name = "vcluster"

    def claims(self, spec: str | None) -> bool:
        return spec in names()  # only what `vcluster up` left: "../x" names nothing

    def resolve(self, spec: str) -> Cluster:
        return cluster_from_state(load_state(spec))

    def not_found(self) -> str:
        known = ", ".join(names()) or "none is up"
        hint = "" if os.geteuid() == 0 else "; they need root, without it use no --cluster"
        return f"no virtual cluster of that name (virtual clusters: {known}{hint})"


def agent_argv(cluster: Cluster, host: str, argv: list[str]) -> list[str]:
    """argv that runs ``argv`` on ``host`` of a virtual cluster (or grid) through the
    cluster's agent (``cluster.extra["agent"]``, :func:`cluster_from_state`)."""
    agent = cluster.extra["agent"]
    return [agent, host, shlex.join(argv)]
