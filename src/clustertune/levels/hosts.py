"""Host facts (``clustertune info``): the resource information of every host, gathered
on the host itself through the cluster's launcher and stored like a measurement, so the
report shows what each run ran on."""

from __future__ import annotations

import argparse
import json
import sys

from .. import report, runner
from ..cli import Output, open_store
from ..cluster import Cluster, resolve_cluster
from ..kernels import KernelOutput
from ..launch import Completed, launcher_for
from ..results import Store
from ..units import format_rate

ORDER = 0
LEVEL = "hosts"
INFO_TIMEOUT_S = 60.0


def collect_cluster(cluster: Cluster) -> dict:
    """Facts of every host; an unreachable host gets an ``error`` entry instead."""
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


def collect_and_store(cluster: Cluster, store: Store) -> dict:
    """Collect the facts and store them as a record of level ``hosts``."""
    facts = collect_cluster(cluster)
    record = runner.new_record(LEVEL, "hostinfo", cluster, {}, [h.name for h in cluster.hosts])
    unreachable = [h["name"] for h in facts["hosts"] if "error" in h]
    completed = Completed(["clustertune", "info"], 1 if unreachable else 0, "", "", 0.0)
    output = KernelOutput(samples=facts["hosts"], result=None if unreachable else {"figures": {}})
    runner.complete_record(record, completed, output)
    if unreachable:
        record["error"] = f"unreachable: {', '.join(unreachable)}"
    store.save(record)
    return facts


def cmd_info(args: argparse.Namespace) -> Output:
    facts = collect_and_store(resolve_cluster(args.cluster), open_store(args))
    ok = all("error" not in h for h in facts["hosts"])
    return Output(facts, describe(facts), 0 if ok else 1)


def add_commands(sub, run_sub, common) -> None:
    p = sub.add_parser("info", parents=[common], help="facts about every host of a cluster")
    p.set_defaults(func=cmd_info)


@report.section(LEVEL, "Hosts", order=5)
def render(records: list[dict]) -> str:
    latest = records[-1]
    rows = [
        [h["name"], h.get("site"), format_rate(h.get("nominal_link_bps")), h["cpu"]["model"],
         h["cpu"]["cores"], " ".join(h["cpu"]["isa"]), f"{(h['memory_bytes'] or 0) / 2**30:.1f}",
         h["blas"]["openblas_core"], h["mpi"]["openmpi"], h["mpi"]["mpich"]]
        for h in latest["samples"] if "error" not in h
    ]  # fmt: skip
    return (
        f"<p>Cluster {report.esc(latest['meta']['cluster']['name'])}, run {latest['id']}.</p>"
        + report.table(
            [
                "host",
                "site",
                "link",
                "cpu",
                "cores",
                "ISA",
                "GiB",
                "OpenBLAS core",
                "Open MPI",
                "MPICH",
            ],
            rows,
        )
    )
