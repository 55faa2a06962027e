"""Slurm per site of a virtual grid, really inside the site's namespaces: munged with the
site's own key, slurmctld on the site's head, slurmd on every host (each in a UTS
namespace named after its host, so NodeHostname and gethostname() agree). Nothing goes
under /etc: clients find the site through ``SLURM_CONF``.

Traps (../shared/research/grid-middleware.md): Debian's Slurm 22.05 is built with
MULTIPLE_SLURMD, and the hosts share one file system, so spool, TmpFS (PMIx app dirs),
pid and log paths carry ``%n``; root-run munged wants a root-owned key and a socket
directory searchable by all; MailProg must exist. Every host has its own address, so all
slurmd of a site listen on the same port.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from ..errors import UserError
from . import daemons

CTLD_PORT, SLURMD_PORT = 6817, 6818
PARTITION = "grid"
TOOLS = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "sbatch", "salloc", "scontrol")


def conf_path(site: dict) -> Path:
    return Path(site["dir"]) / "slurm.conf"


def env(site: dict) -> dict[str, str]:
    return {"SLURM_CONF": str(conf_path(site))}


def client(site: dict, argv: list[str]) -> list[str]:
    """argv of a Slurm client command run on the site's head (a login node)."""
    head = next(h for h in site["hosts"] if h["name"] == site["head"])
    return daemons.in_namespace(head["namespace"], ["env", f"SLURM_CONF={conf_path(site)}", *argv])


def run_client(site: dict, argv: list[str], timeout: float = 20.0) -> subprocess.CompletedProcess:
    return subprocess.run(client(site, argv), capture_output=True, text=True, timeout=timeout)


def write_conf(grid: str, site: dict, cpus: int) -> None:
    head = next(h for h in site["hosts"] if h["name"] == site["head"])
    nodes = [
        {"NodeName": h["name"], "NodeHostname": h["name"], "NodeAddr": h["address"]}
        for h in site["hosts"]
    ]
    write_conf_file(
        conf_path(site),
        f"{grid}{site['name']}",
        f"{head['name']}({head['address']})",
        (CTLD_PORT, SLURMD_PORT),
        Path(site["dir"]) / "munge" / "sock",
        nodes,
        cpus,
        PARTITION,
    )


def write_conf_file(
    path: Path,
    cluster: str,
    controller: str,
    ports: tuple[int, int],
    munge_socket: Path,
    nodes: list[dict],
    cpus: int,
    partition: str,
) -> None:
    """slurm.conf (``path``; state, spool, TmpFS, pids and logs beside it, ``%n`` in every
    per-node path) for one slurmctld and one slurmd per node, all on one file system: a
    virtual grid's site, and the tests' loopback Slurm (tests/slurm_loopback.py).
    ``ports``: slurmctld's, slurmd's; ``nodes``: each node's NodeName line fields."""
    d = path.parent
    lines = [
        f"ClusterName={cluster}"[:40],
        f"SlurmctldHost={controller}",
        "SlurmUser=root",
        f"SlurmctldPort={ports[0]}",
        f"SlurmdPort={ports[1]}",
        "AuthType=auth/munge",
        f"AuthInfo=socket={munge_socket}",
        "CredType=cred/munge",
        f"StateSaveLocation={d / 'state'}",
        f"SlurmdSpoolDir={d / 'spool'}/%n",
        f"TmpFS={d / 'tmp'}/%n",  # PMIx app dirs would clash between the nodes
        f"SlurmctldPidFile={d / 'slurmctld.pid'}",
        f"SlurmdPidFile={d}/slurmd-%n.pid",
        f"SlurmctldLogFile={d / 'log' / 'slurmctld.log'}",
        f"SlurmdLogFile={d}/log/slurmd-%n.log",
        "MailProg=/bin/true",
        "ProctrackType=proctrack/linuxproc",
        "TaskPlugin=task/none",
        "JobAcctGatherType=jobacct_gather/none",
        "AccountingStorageType=accounting_storage/none",
        "SelectType=select/cons_tres",
        "SelectTypeParameters=CR_Core",
        "MpiDefault=none",
        "ReturnToService=2",
        # a slurmd slow to answer on a loaded machine is not taken for dead (a dead one is
        # named by the grid's own heartbeat, which waits on no Slurm timeout)
        "SlurmdTimeout=30",
        "KillWait=2",
        "MinJobAge=600",  # a finished job stays visible to scontrol: its state and exit code
    ]
    for node in nodes:
        fields = " ".join(f"{key}={value}" for key, value in node.items())
        lines.append(f"{fields} CPUs={cpus} State=UNKNOWN")
        for sub in ("spool", "tmp"):
            (d / sub / node["NodeName"]).mkdir(parents=True, exist_ok=True)
    names = ",".join(node["NodeName"] for node in nodes)
    lines.append(f"PartitionName={partition} Nodes={names} Default=YES MaxTime=INFINITE State=UP")
    path.write_text("\n".join(lines) + "\n")


def node_states(site: dict) -> dict[str, str]:
    try:
        out = run_client(site, ["sinfo", "-h", "-N", "-o", "%N %t"], timeout=5).stdout
    except subprocess.TimeoutExpired:
        return {}
    return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)


def start(grid: str, site: dict, timeout: float = 30.0) -> None:
    """munged, slurmctld, every slurmd; returns when every node is idle. Pids go into
    ``site["pids"]`` as they start, so a failure half-way is still cleaned up."""
    missing = [t for t in TOOLS if not _which(t)]
    if missing:
        raise UserError(
            f"site {site['name']}: Slurm/munge not installed ({', '.join(missing)}): make apt"
        )
    d = Path(site["dir"])
    for sub in ("state", "log", "spool", "tmp", "munge"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    m = d / "munge"
    for p in (d, m):
        p.chmod(0o755)  # munged: every directory above its socket searchable by all
    key = subprocess.run(
        ["mungekey", "-c", "-f", "-k", str(m / "munge.key")], capture_output=True, text=True
    )
    if key.returncode != 0:
        raise UserError(f"site {site['name']}: mungekey: {key.stderr.strip()}")
    head = next(h for h in site["hosts"] if h["name"] == site["head"])
    logs = {"munged": m / "munged.log", "slurmctld": d / "log" / "slurmctld.log"}
    pids = site["pids"]
    pids["munged"] = daemons.start(
        grid,
        head["namespace"],
        [
            "munged",
            "-F",
            f"--key-file={m / 'munge.key'}",
            f"--socket={m / 'sock'}",
            f"--pid-file={m / 'munged.pid'}",
            f"--log-file={m / 'munged.log'}",
            f"--seed-file={m / 'seed'}",
        ],
        m / "munged.out",
    )
    daemons.wait_for(
        f"site {site['name']}: munged ready", lambda: (m / "sock").exists(), timeout, pids, logs
    )
    write_conf(grid, site, os.cpu_count() or 2)
    conf = str(conf_path(site))
    pids["slurmctld"] = daemons.start(
        grid,
        head["namespace"],
        ["slurmctld", "-D", "-f", conf],
        d / "log" / "slurmctld.out",
        uts=head["name"],
    )
    for h in site["hosts"]:
        name = f"slurmd-{h['name']}"
        logs[name] = d / "log" / f"{name}.log"
        pids[name] = daemons.start(
            grid,
            h["namespace"],
            ["slurmd", "-D", "-N", h["name"], "-f", conf],
            d / "log" / f"{name}.out",
            uts=h["name"],
        )
    nodes = [h["name"] for h in site["hosts"]]
    daemons.wait_for(
        f"site {site['name']}: nodes {','.join(nodes)} idle",
        lambda: node_states(site) == dict.fromkeys(nodes, "idle"),
        timeout,
        pids,
        logs,
    )


def _which(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is not None
