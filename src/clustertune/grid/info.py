"""Resource information over a grid (MDS's role in seeds/000): per site and host, the CPU,
cores, memory and load (read on the site through its access path), the scheduler's
state (Slurm: each node's state and CPUs allocated/idle, jobs running and pending; a
site without a batch system: its hosts' load), the MPI libraries and BLAS, and the links
(inside the site, the WAN). Gathered on demand and cached in the grid's directory with
its time: ``info(grid, max_age)`` answers from the cache while it is younger than
``max_age`` seconds and says how old it is. ``pick_site`` is what the submission layer
asks: the site with the most free CPUs for a job of ``count`` ranks.

On a virtual grid every site runs on this one machine, so the hosts' CPU and memory
are this machine's; the scheduler state and the load as each site sees it are its own.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from ..errors import UserError
from . import slurm, staging

CACHE = "info.json"
PROBE = (
    "echo cores $(nproc); grep -m1 '^model name' /proc/cpuinfo; "
    "grep -m1 '^MemTotal' /proc/meminfo; echo load $(cut -d' ' -f1-3 /proc/loadavg)"
)


def _parse_probe(text: str) -> dict:
    out: dict = {}
    for line in text.splitlines():
        if line.startswith("cores "):
            out["cores"] = int(line.split()[1])
        elif line.startswith("model name"):
            out["cpu"] = line.split(":", 1)[1].strip()
        elif line.startswith("MemTotal"):
            out["memory_bytes"] = int(line.split()[1]) * 1024
        elif line.startswith("load "):
            out["load"] = [float(x) for x in line.split()[1:4]]
    return out


def _slurm_state(site: dict, timeout: float) -> dict:
    """Nodes (state, CPUs allocated/idle/total) and jobs (running, pending) of a Slurm site."""
    nodes = slurm.run_client(site, ["sinfo", "-h", "-N", "-o", "%N %t %C"], timeout=timeout)
    if nodes.returncode != 0:
        return {"answering": False, "error": (nodes.stderr.strip().splitlines() or ["?"])[-1]}
    per_node = {}
    for line in nodes.stdout.splitlines():
        name, state, cpus = line.split()
        allocated, idle, _other, total = (int(x) for x in cpus.split("/"))
        per_node[name] = {
            "state": state,
            "cpus_allocated": allocated,
            "cpus_idle": idle,
            "cpus": total,
        }
    queue = slurm.run_client(site, ["squeue", "-h", "-o", "%t"], timeout=timeout).stdout.split()
    return {
        "answering": True,
        "nodes": per_node,
        "jobs_running": queue.count("R"),
        "jobs_pending": queue.count("PD"),
    }


def gather(grid: dict, timeout: float = 20.0) -> dict:
    """Ask every site now (one probe on its head through its access path, the scheduler)."""
    from ..hostinfo import blas_info, mpi_versions

    sites = []
    for site in grid["sites"]:
        entry: dict = {
            "name": site["name"],
            "scheduler": site["scheduler"],
            "contact": site["contact"],
            "hosts": [h["name"] for h in site["hosts"]],
            "link_bps": grid.get("link_bps"),
        }
        try:
            out = subprocess.run(
                staging.shell(grid, site, PROBE), capture_output=True, text=True, timeout=timeout
            )
            entry["head"] = (
                _parse_probe(out.stdout)
                if out.returncode == 0
                else {"error": (out.stderr.strip().splitlines() or [f"exit {out.returncode}"])[-1]}
            )
        except subprocess.TimeoutExpired:
            entry["head"] = {"error": f"no answer within {timeout:g} s"}
        if site["scheduler"] == "slurm" or site.get("lrm") == "slurm":  # GRAM's too
            try:
                entry["batch"] = _slurm_state(site, timeout)
            except subprocess.TimeoutExpired:
                entry["batch"] = {"answering": False, "error": f"no answer within {timeout:g} s"}
        sites.append(entry)
    return {
        "grid": grid["name"],
        "gathered": time.time(),
        "wan_bps": grid.get("wan_bps"),
        "mpi": {k: v for k, v in mpi_versions().items() if v},
        "blas": blas_info(),
        "sites": sites,
    }


def info(grid: dict, max_age: float = 30.0) -> dict:
    """The cached information while younger than ``max_age`` s, else gathered anew; with
    ``age_s`` (how old the answer is) and ``cached``."""
    path = Path(grid["dir"]) / CACHE
    if max_age > 0 and path.is_file():
        with_age = json.loads(path.read_text())
        age = time.time() - with_age["gathered"]
        if 0 <= age <= max_age:
            return {**with_age, "age_s": round(age, 3), "cached": True}
    fresh = gather(grid)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(fresh))
    tmp.replace(path)
    return {**fresh, "age_s": 0.0, "cached": False}


def free_cpus(site: dict) -> int:
    """CPUs a new job could get now: idle CPUs of the Slurm nodes that take jobs, else the
    head's cores less its load (a site without batch system shares its hosts)."""
    batch = site.get("batch")
    if batch is not None:
        if not batch.get("answering"):
            return 0
        usable = ("idle", "mix")
        return sum(n["cpus_idle"] for n in batch["nodes"].values() if n["state"] in usable)
    head = site.get("head", {})
    if "cores" not in head:
        return 0
    per_host = max(0, round(head["cores"] - head.get("load", [0.0])[0]))
    return per_host * len(site["hosts"])


def pick_site(grid: dict, count: int = 1, max_age: float = 30.0) -> tuple[str, dict]:
    """(the site with the most free CPUs that can start ``count`` ranks, the information
    it was chosen from); a UserError saying what each site offers when none can."""
    known = info(grid, max_age)
    offers = {s["name"]: free_cpus(s) for s in known["sites"]}
    fit = [name for name, free in offers.items() if free >= count]
    if not fit:
        said = ", ".join(f"{n}: {f}" for n, f in offers.items())
        raise UserError(f"no site can start {count} rank(s) now (free CPUs: {said})")
    return max(fit, key=lambda n: offers[n]), known


def describe(known: dict) -> str:
    from ..units import format_rate

    lines = [
        f"grid {known['grid']} (information {known['age_s']:.1f} s old"
        f"{', cached' if known['cached'] else ''}); WAN "
        f"{format_rate(known['wan_bps']) if known.get('wan_bps') else '-'}; MPI "
        f"{', '.join(f'{k} {v}' for k, v in known['mpi'].items()) or '-'}; BLAS "
        f"{known['blas'].get('library') or '-'}"
    ]
    for s in known["sites"]:
        head = s.get("head", {})
        cpu = (
            f"{head.get('cores', '?')} cores {head.get('cpu', '?')}, "
            f"{head.get('memory_bytes', 0) / 2**30:.1f} GiB, load "
            f"{' '.join(str(x) for x in head.get('load', []))}"
            if "error" not in head
            else f"unreachable: {head['error']}"
        )
        lines.append(
            f"  {s['name']:6} {s['scheduler']:5} {s['contact']:12} "
            f"hosts {','.join(s['hosts'])}: {cpu}; free CPUs {free_cpus(s)}"
        )
        batch = s.get("batch")
        if batch and batch.get("answering"):
            nodes = " ".join(
                f"{n}={v['state']}({v['cpus_idle']}/{v['cpus']} idle)"
                for n, v in batch["nodes"].items()
            )
            lines.append(
                f"         slurm: {nodes}; jobs running {batch['jobs_running']}, "
                f"pending {batch['jobs_pending']}"
            )
        elif batch:
            lines.append(f"         slurm not answering: {batch.get('error')}")
    return "\n".join(lines)
