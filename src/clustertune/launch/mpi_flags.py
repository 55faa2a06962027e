"""Command-line flags of the two MPI launchers, shared by every clustertune launcher.

Traps measured on these machines (../shared/research/virtual-cluster.md):
  * OpenMPI ranks that busy-poll on an oversubscribed 2-core box lose a whole scheduler
    tick (4 ms) per message unless ``mpi_yield_when_idle`` is on;
  * OpenMPI's transport is pinned (ob1 over tcp/self/vader) so a run measures what it says;
  * MPICH over UCX treats namespaces on one machine as one host and uses shared memory
    unless ``UCX_TLS=tcp,self``; with TCP, MPICH 4.0.2 sometimes hangs in MPI_Finalize,
    hence the finalize shim preloaded in that case;
  * OpenMPI binds the ranks of a small job to cores, counted per node: with one rank per
    virtual host every rank went to core 0 of this machine (``bind=False`` for hosts that
    share one machine's cores; MPICH's hydra does not bind by default).
"""

from __future__ import annotations

import os
from pathlib import Path

from .. import kernels

FINALIZE_SHIM = "libct_finalize_shim.so"


def openmpi(
    np: int,
    env: dict[str, str],
    hostfile: Path | None = None,
    agent: str | None = None,
    interface: str | None = None,
    bind: bool = True,
) -> list[str]:
    argv = [
        "mpirun.openmpi",
        "-np",
        str(np),
        "--mca",
        "pml",
        "ob1",
        "--mca",
        "btl",
        "self,vader,tcp",
        "--mca",
        "mpi_yield_when_idle",
        "1",
    ]
    if not bind:
        argv += ["--bind-to", "none"]
    if hostfile is None:
        argv += ["--oversubscribe"]
    else:
        argv += ["--hostfile", str(hostfile), "--map-by", "node"]
    if agent:
        argv += ["--mca", "plm_rsh_agent", agent]
    if interface:
        argv += ["--mca", "btl_tcp_if_include", interface, "--mca", "oob_tcp_if_include", interface]
    for name in sorted(env):
        argv += ["-x", name]  # exports the launcher's value of each variable to the ranks
    return argv


def openmpi_hostfile(hosts: list[str], slots: int) -> str:
    return "".join(f"{host} slots={slots}\n" for host in hosts)


def mpich(
    np: int,
    env: dict[str, str],
    hostfile: Path | None = None,
    agent: str | None = None,
    interface: str | None = None,
) -> list[str]:
    argv = ["mpiexec.mpich", "-n", str(np)]
    if hostfile is not None:
        argv += ["-f", str(hostfile)]
    if agent:
        argv += ["-launcher", "rsh", "-launcher-exec", agent]
    genv = dict(env)
    if interface:  # pinned to one NIC means TCP: keep UCX off shared memory, avoid the hang
        # a value the user exported wins (and is what the record's env knobs show)
        genv.setdefault("UCX_TLS", os.environ.get("UCX_TLS", "tcp,self"))
        genv.setdefault("UCX_NET_DEVICES", os.environ.get("UCX_NET_DEVICES", interface))
        genv["LD_PRELOAD"] = str(kernels.kernel_path(FINALIZE_SHIM, "mpich"))
    for name in sorted(genv):
        argv += ["-genv", name, genv[name]]
    return argv


def mpich_hostfile(hosts: list[str]) -> str:
    # one entry per host: hydra then cycles through them, i.e. round-robin like --map-by node
    return "".join(f"{host}:1\n" for host in hosts)
