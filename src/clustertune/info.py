"""``clustertune info``: host facts gathered on every host through the cluster's launcher."""

from __future__ import annotations

import json
import sys

from .cluster import Cluster
from .launch import launcher_for
from .units import format_rate

INFO_TIMEOUT_S = 60.0


def collect_cluster(cluster: Cluster) -> dict:
    launcher = launcher_for(cluster)
    hosts = []
    for host in cluster.hosts:
        done = launcher.run_on_host(
            host.name, [sys.executable, "-m", "clustertune.hostinfo"], INFO_TIMEOUT_S
        )
        entry: dict = {"name": host.name, "site": host.site, "nominal_link_bps": host.link_bps}
        try:
            entry.update(json.loads(done.stdout))
        except json.JSONDecodeError:
            entry["error"] = (done.stderr.strip() or f"exit status {done.returncode}")[-500:]
        hosts.append(entry)
    return {
        "cluster": cluster.name,
        "launcher": cluster.launcher,
        "source": cluster.source,
        "wan_bps": cluster.wan_bps,
        "delay_us": cluster.delay_us,
        "hosts": hosts,
    }


def describe(facts: dict) -> str:
    lines = [f"cluster {facts['cluster']} ({facts['launcher']}, {facts['source']})"]
    for h in facts["hosts"]:
        if "error" in h:
            lines.append(f"  {h['name']}: UNREACHABLE: {h['error']}")
            continue
        mem = (h["memory_bytes"] or 0) / 2**30
        blas = h["blas"]
        lines += [
            f"  {h['name']} (hostname {h['hostname']}, {h['site']}, nominal link "
            f"{format_rate(h['nominal_link_bps'])})",
            f"    cpu     {h['cpu']['model']}, {h['cpu']['cores']} cores, ISA {' '.join(h['cpu']['isa'])}",
            f"    memory  {mem:.1f} GiB; {h['os']['name']}, kernel {h['os']['kernel']}",
            f"    mpi     openmpi: {h['mpi']['openmpi']}; mpich: {h['mpi']['mpich']}",
            f"    blas    {blas['library']} (OpenBLAS core {blas['openblas_core']})",
            "    nics    "
            + ", ".join(
                f"{n['name']} {str(n['speed_mbps']) + ' Mb/s' if n['speed_mbps'] else '(speed n/a)'}"
                for n in h["nics"]
            ),
        ]
    return "\n".join(lines)
