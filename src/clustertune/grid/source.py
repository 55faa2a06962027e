"""``--cluster NAME`` for a virtual grid that ``grid up`` left on disk: the virtual
cluster's hosts, each site with the grid launcher and its scheduler and contact in the
site's settings (a cluster source of the grid level, ahead of the plain virtual cluster
of the same name)."""

from __future__ import annotations

import os
from dataclasses import replace

from .. import vcluster
from ..cluster import Cluster, Site
from . import virtual


def cluster_from_grid(state: dict) -> Cluster:
    base = vcluster.cluster_from_state(vcluster.load_state(state["name"]))
    sites = tuple(
        Site(
            s["name"],
            "grid",
            state["wan_bps"] if len(state["sites"]) > 1 else None,
            {"scheduler": s["scheduler"], "contact": s["contact"], "head": s["head"]},
        )
        for s in state["sites"]
    )
    return replace(
        base,
        sites=sites,
        source=f"grid:{state['name']}",
        extra={**base.extra, "grid": state["name"], "grid_dir": state["dir"]},
    )


class VirtualGrid:
    name = "grid"

    def claims(self, spec: str | None) -> bool:
        return bool(spec) and spec in virtual.names()

    def resolve(self, spec: str) -> Cluster:
        return cluster_from_grid(virtual.load(spec))

    def not_found(self) -> str:
        known = ", ".join(virtual.names()) or "none is up"
        hint = "" if os.geteuid() == 0 else " (they need root)"
        return f"no virtual grid of that name (virtual grids: {known}{hint})"
