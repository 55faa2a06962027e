#!/usr/bin/env python3
"""The network diagnosis against healthy and faulty virtual clusters (issue 19).

1. healthy: ``net matrix --layer tcp`` on a healthy --hosts-host --link cluster (paced
   wire by default), --runs times on an idle start and --busy-runs times with one busy
   loop beside it (a process spinning on one CPU); prints the count of runs with any
   flag (target: 0 and 0), and of runs not judged because the emulated wire was late.
2. faults: each fault the network tests know, injected into a fresh cluster of the same
   shape, --fault-runs matrices each: loss on one host (0.1 %), loss between two hosts
   only (0.1 %), a flapping host (300 ms down every 1 s), a slow host (100 Mbit on a
   1 Gbit fabric), a host slow in one direction (its transmit side at 100 Mbit); prints
   which hosts or links were named: right means the faulty one, alone.
3. scale (--scale 16,32): one healthy matrix per cluster size, idle start: its wall time
   and flags (targets: 16 hosts <= 60 s, 32 hosts <= 3 min, no flag).

Every run prints its time, the load average at its start and end (the machine may be
shared: say so beside the counts) and the worst pacer's p99 lateness. Needs root
(network namespaces); the clusters are removed on exit.

Usage: bench/network_diagnosis.py [--runs 20] [--busy-runs 20] [--fault-runs 1]
    [--hosts 6] [--link 1gbit] [--wire paced] [--only healthy,faults,scale]
    [--scale 16,32] [--json out.json]
    (defaults: ~20 min on an idle 2-core machine; --runs 5 --busy-runs 5: ~5 min)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from clustertune import vcluster  # noqa: E402
from clustertune.levels.network import matrix, matrix_output  # noqa: E402
from clustertune.results import Store  # noqa: E402
from clustertune.units import parse_rate  # noqa: E402

PREFIX = "dnd"  # the bench's clusters: dndh (healthy), dndf (faults), dnds<n> (scale)
FLAP = {"flap": {"down_ms": 300, "period_ms": 1000}}
# name: (the cluster's faults, what must be named: a host, or a pair "hostA-hostB")
FAULTS = {
    "loss on one host (0.1 %)": ({"host_faults": {"host2": {"loss": 0.001}}}, "host2"),
    "loss between two hosts only (0.1 %)": (
        {"link_faults": {"host1-host2": {"loss": 0.001}}}, "host1-host2"
    ),
    "a flapping host (300 ms every 1 s)": ({"host_faults": {"host2": FLAP}}, "host2"),
    "a slow host (100 Mbit)": ({"host_faults": {"host2": {"rate_bps": 10**8}}}, "host2"),
    "a host slow one way (transmit 100 Mbit)": (
        {"host_faults": {"host2": {"tx_rate_bps": 10**8}}}, "host2"
    ),
}  # fmt: skip
SCALE_LIMIT_S = {16: 60.0, 32: 180.0}


def load() -> float:
    return os.getloadavg()[0]


def named(doc: dict) -> list[str]:
    """Whom a matrix's flags blame: hosts, pairs as "hostA-hostB" (sorted), the fabric."""
    blamed = set()
    for f in doc["flagged"]:
        if "host" in f:
            blamed.add(f["host"])
        elif "pair" in f:
            blamed.add("-".join(sorted(f["pair"])))
        else:
            blamed.add("fabric")
    return sorted(blamed)


def verdict(doc: dict, expected: str) -> str:
    """right (the expected host or link alone), not judged (a late wire), or wrong."""
    blamed = named(doc)
    if blamed == [expected]:
        return "right"
    if not blamed and doc.get("not_judged"):
        return "not judged"
    return "wrong"


def one_matrix(cluster, store: Store) -> dict:
    """One ``net matrix --layer tcp``: its JSON document, with wall time and load."""
    start, load_start = time.monotonic(), load()
    doc = matrix_output.matrix_json(matrix.run_matrix(cluster, store, layer="tcp"))
    return doc | {"wall_s": time.monotonic() - start, "load": [load_start, load()]}


def line(doc: dict) -> str:
    late = doc.get("wire_late_us") or {}
    wire = ", ".join(f"{k} {v['p99_us']:.0f}" for k, v in late.items() if v["p99_us"] is not None)
    return (
        f"{doc['wall_s']:6.1f} s  load {doc['load'][0]:5.2f} -> {doc['load'][1]:5.2f}  "
        f"wire p99 µs: {wire or '-'}  named: {', '.join(named(doc)) or 'nothing'}"
        + (f"  ({doc['not_judged']})" if doc.get("not_judged") else "")
    )


def cluster_up(name: str, hosts: int, link_bps: int | None, wire: str, **faults):
    vcluster.down(name)
    state = vcluster.up(vcluster.plan(name, hosts, link_bps, wire=wire, **faults))
    return vcluster.cluster_from_state(state)


def healthy(args, store: Store, busy: bool) -> list[dict]:
    runs = args.busy_runs if busy else args.runs
    if not runs:
        return []
    cluster = cluster_up(PREFIX + "h", args.hosts, args.link_bps, args.wire)
    spin = None
    if busy:  # one CPU's worth of work beside the matrix, as a user's job would be
        spin = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    docs = []
    try:
        for i in range(runs):
            docs.append(one_matrix(cluster, store))
            print(
                f"  healthy{' + busy loop' if busy else ''} {i + 1}/{runs}: {line(docs[-1])}",
                flush=True,
            )
    finally:
        if spin:
            spin.kill()
            spin.wait()
        vcluster.down(cluster.name)
    flagged = sum(bool(d["flagged"]) for d in docs)
    unjudged = sum(bool(d.get("not_judged")) for d in docs)
    print(
        f"healthy{', one busy loop' if busy else ', idle'}: {flagged} of {runs} runs with "
        f"any flag (target 0); {unjudged} not judged (wire late)",
        flush=True,
    )
    return docs


def faults(args, store: Store) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {}
    for kind, (fault, expected) in FAULTS.items():
        cluster = cluster_up(PREFIX + "f", args.hosts, args.link_bps, args.wire, **fault)
        try:
            docs = [one_matrix(cluster, store) for _ in range(args.fault_runs)]
        finally:
            vcluster.down(cluster.name)
        for d in docs:
            d["verdict"] = verdict(d, expected)
            print(f"  {kind}: {d['verdict']}: {line(d)}", flush=True)
        right = sum(d["verdict"] == "right" for d in docs)
        print(f"{kind}: {expected} named alone in {right} of {len(docs)}", flush=True)
        results[kind] = docs
    return results


def scale(args, store: Store) -> dict[int, dict]:
    results = {}
    for n in args.scale:
        cluster = cluster_up(f"{PREFIX}s{n}", n, args.link_bps, args.wire)
        try:
            doc = one_matrix(cluster, store)
        finally:
            vcluster.down(cluster.name)
        limit = SCALE_LIMIT_S.get(n)
        within = "" if limit is None else f" (target <= {limit:.0f} s, no flag)"
        print(f"scale {n} hosts: {line(doc)}{within}", flush=True)
        results[n] = doc
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=20, help="healthy matrices, idle start")
    ap.add_argument("--busy-runs", type=int, default=20, help="healthy, one busy loop beside")
    ap.add_argument("--fault-runs", type=int, default=1, help="matrices per fault")
    ap.add_argument("--hosts", type=int, default=6)
    ap.add_argument("--link", default="1gbit")
    ap.add_argument("--wire", default=vcluster.DEFAULT_WIRE, choices=vcluster.WIRES)
    ap.add_argument("--only", default="healthy,faults", help="healthy, faults, scale")
    ap.add_argument("--scale", default="16,32", help="cluster sizes of the scale part")
    ap.add_argument("--json", type=Path, help="write every run's matrix document here")
    args = ap.parse_args(argv)
    args.link_bps = parse_rate(args.link)
    args.scale = [int(n) for n in args.scale.split(",")]
    parts = set(args.only.split(","))
    if parts - {"healthy", "faults", "scale"}:
        ap.error(f"--only {args.only}: expected healthy, faults and/or scale")
    vcluster.require_root()
    print(
        f"{os.cpu_count()} CPUs, load {os.getloadavg()}, {args.hosts} hosts, {args.link}, "
        f"wire {args.wire}",
        flush=True,
    )
    out: dict = {}
    with tempfile.TemporaryDirectory(prefix="ct-bench-") as tmp:
        store = Store(Path(tmp) / "results.db")
        if "healthy" in parts:
            out["idle"] = healthy(args, store, busy=False)
            out["busy"] = healthy(args, store, busy=True)
        if "faults" in parts:
            out["faults"] = faults(args, store)
        if "scale" in parts:
            out["scale"] = scale(args, store)
        store.close()
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    clean = all(not d["flagged"] for d in out.get("idle", []) + out.get("busy", []))
    right = all(d["verdict"] == "right" for ds in out.get("faults", {}).values() for d in ds)
    fast = all(
        not d["flagged"] and d["wall_s"] <= SCALE_LIMIT_S.get(n, float("inf"))
        for n, d in out.get("scale", {}).items()
    )
    return 0 if clean and right and fast else 1


if __name__ == "__main__":
    sys.exit(main())
