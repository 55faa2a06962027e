"""Host facts (``clustertune info``): the resource information of every host, gathered
on the host itself through the cluster's launcher and stored like a measurement, so the
report shows what each run ran on."""

from __future__ import annotations

import argparse
import sys

from ... import render
from ...cluster import Cluster
from ...commands import Output, cluster_of, open_store
from ...results import Store
from ...runner import Run
from ...units import format_rate
from . import LEVEL

INFO_TIMEOUT_S = 60.0


def collect_and_store(cluster: Cluster, store: Store) -> dict:
    """The facts of every host, gathered on the host itself and stored as one record of
    level ``hosts`` (its samples; an unreachable host is a failed step of that run); the
    ``clustertune info`` document: per host its facts, or why it could not be read."""
    with Run(cluster, store, level=LEVEL.name, kernel="hostinfo", composite=True) as run:
        hosts = []
        for host in cluster.hosts:
            where = {"name": host.name, "site": host.site, "nominal_link_bps": host.link_bps}
            step = run.program(
                host.name,
                [sys.executable, "-m", "clustertune.hostinfo"],
                timeout=INFO_TIMEOUT_S,
                what=host.name,
                tag=where,
            )
            if step.output.samples:
                hosts.append(step.output.samples[0])
            else:
                said = step.completed.stderr.strip()[-500:]
                hosts.append(where | {"error": said or "; ".join(step.problems) or "no answer"})
        unreachable = {h["name"]: h["error"] for h in hosts if "error" in h}
        # kept in the record, so the report can say which host failed and why
        run.result = {"verification": "not-verified", "detail": {"unreachable": unreachable}}
        if unreachable:
            run.problems.append(f"unreachable: {', '.join(unreachable)}")
    return {
        "run_id": run.record["id"],
        "cluster": cluster.name,
        "launcher": run.record["meta"]["cluster"]["launcher"],
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
            "    chosen  " + chosen_blas(blas.get("choice")),
            "    nics    "
            + ", ".join(
                f"{n['name']} {str(n['speed_mbps']) + ' Mb/s' if n['speed_mbps'] else '(speed n/a)'}"
                for n in h["nics"]
            ),
        ]
    return "\n".join(lines)


def chosen_blas(choice: dict | None) -> str:
    """The host's measured default BLAS (levels/linpack/choice.py), or that there is none."""
    if not choice:
        return "none measured yet (the first linpack/gemm run measures it)"
    return (
        f"{choice['label']} {choice.get('version') or ''} (measured {choice['measured']}, "
        f"DGEMM {choice['dgemm_cpu_gflops']:.1f} Gflop/s by CPU time)"
    )


def cmd_info(args: argparse.Namespace) -> Output:
    facts = collect_and_store(cluster_of(args), open_store(args))
    ok = all("error" not in h for h in facts["hosts"])
    return Output(facts, describe(facts), 0 if ok else 1)


def add_commands(sub, common) -> None:
    p = sub.add_parser("info", parents=[common], help="facts about every host of a cluster")
    p.set_defaults(func=cmd_info)


def demo(cluster: Cluster, store: Store) -> list[dict]:
    return [store.get(collect_and_store(cluster, store)["run_id"])]


def unreachable_of(record: dict) -> dict[str, str]:
    """Host -> why ``info`` could not read it, in one ``hosts`` record."""
    if "unreachable" in record["detail"]:
        return record["detail"]["unreachable"]
    # records stored before the detail was: the hosts without facts, the run's error
    answered = {h["name"] for h in record["samples"]}
    reason = (record["error"] or "no answer").splitlines()[0]
    return {n: reason for n in record["meta"]["cluster"]["hosts"] if n not in answered}


def section(records: list[dict]) -> str:
    """Per cluster: the latest inventory that read every host, and, when a later ``info``
    did not, which hosts it could not read and why."""
    by_cluster: dict[str, list[dict]] = {}
    for record in records:
        by_cluster.setdefault(record["meta"]["cluster"]["name"], []).append(record)
    parts = []
    for name, runs in by_cluster.items():
        parts.append(f"<h3>Cluster {render.esc(name)}</h3>")
        latest = runs[-1]
        inventory = next((r for r in reversed(runs) if r["status"] == "ok"), None)
        if latest is not inventory:
            missing = unreachable_of(latest)
            said = (
                f"could not read {len(missing)} host(s)" if missing else render.esc(latest["error"])
            )
            parts.append(
                f"<p>Latest run {latest['id']} ({render.esc(latest['status'])}): {said}.</p>"
            )
            if missing:
                parts.append(
                    render.table(["host", "why"], [[h, why] for h, why in missing.items()])
                )
        if inventory is None:
            parts.append("<p>No run has read every host of this cluster.</p>")
            continue
        rows = [
            [
                h["name"],
                h.get("site"),
                format_rate(h.get("nominal_link_bps")),
                h["cpu"]["model"],
                h["cpu"]["cores"],
                " ".join(h["cpu"]["isa"]),
                f"{(h['memory_bytes'] or 0) / 2**30:.1f}",
                h["blas"]["openblas_core"],
                h["mpi"]["openmpi"],
                h["mpi"]["mpich"],
            ]
            for h in inventory["samples"]
        ]
        headers = [
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
        ]
        parts.append(f"<p>Inventory: run {inventory['id']}.</p>" + render.table(headers, rows))
    return "".join(parts)
