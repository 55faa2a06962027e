"""The MPI implementations clustertune runs, each described once, as a :class:`Flavour`.

A flavour holds what the project knows of one MPI: the name ``--mpi``, the build trees
and the records use; the program that starts its ranks and how that program's command
line is built (rank count, hostfile, remote agent, network interface, binding, variables
passed to the ranks); its hostfile format; what it needs to run as root; its Slurm PMI
plug-in (srun starting the ranks in place of that program); its TCP socket buffer
variables; the project's shims preloaded into its ranks. The launchers (launch/), the
grid's job back-ends and the I/O service build their MPI part from it; nothing else
branches on an MPI's name. This module imports nothing of clustertune but its errors, so
the cluster model, the kernel finder and the CLI may import it.

Traps measured on these machines (../shared/research/virtual-cluster.md):
  * OpenMPI ranks that busy-poll on an oversubscribed 2-core box lose a whole scheduler
    tick (4 ms) per message unless ``mpi_yield_when_idle`` is on;
  * OpenMPI's transport is pinned (ob1 over tcp/self/vader) so a run measures what it says;
  * MPICH over UCX treats namespaces on one machine as one host and uses shared memory
    unless ``UCX_TLS=tcp,self``; with TCP, MPICH 4.0.2 sometimes hangs in MPI_Finalize,
    hence the finalize shim preloaded in that case;
  * OpenMPI binds the ranks of a small job to cores, counted per node: with one rank per
    virtual host every rank went to core 0 of this machine (``bind=False`` for hosts that
    share one machine's cores; MPICH's hydra does not bind by default);
  * under srun, OpenMPI's shared memory (vader) crashes when "different nodes" share one
    machine: ranks started by srun there are kept on TCP alone;
  * OpenMPI 4.1's TCP transport reads its sockets from the event library, ticked at every
    progress call only while a connected TCP peer is counted (else every 10 ms). When two
    ranks dial each other at once, the one that keeps its peer's connection closes its own
    unfinished dial and subtracts it without ever having counted it: connected, it counts
    0 and reads every 10 ms (a 2-rank ping-pong at 5 ms per message, 1 run in 10 to 40).
    ``mpi_event_tick_rate`` 1 (us) ticks it at every call, as a counted peer does.
"""

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..errors import UserError

IO_DRIVERS = ("romio", "ompio")  # the MPI-IO implementations a run may ask for (--driver)
OPENMPI_IO_COMPONENTS = {
    "romio": "romio321",
    "ompio": "ompio",
}  # its MCA io components; MPICH: ROMIO

# (a built file's name, flavour) -> its path: clustertune.kernels.kernel_path, passed in
# by the caller since the kernel finder sits above this module
Locate = Callable[[str, str], Path]


@dataclass(frozen=True)
class Placement:
    """Where and how :meth:`Flavour.argv` places the ranks (its keyword arguments)."""

    hostfile: Path | None
    agent: str | None
    interface: str | None
    bind: bool
    locate: Locate | None
    spans_hosts: bool


@dataclass(frozen=True)
class Flavour(ABC):
    name: str  # --mpi, the build tree (build/<name>), the records' "mpi"
    launcher: str  # the program that starts the ranks (Debian's name for it)
    pmi_plugin: str  # srun --mpi=...: Debian's OpenMPI is built with PMIx, its MPICH speaks PMI-2
    # seeds/000 table 4 set MPICH's socket buffers through Globus RSL / P4
    tcp_buffer_vars: tuple[str, ...]
    shims: tuple[str, ...] = ()  # libraries of kernels/shims preloaded into its ranks
    root_vars: tuple[str, ...] = ()  # set to 1 when run as root (it refuses otherwise)

    def argv(
        self,
        np: int,
        env: dict[str, str],
        *,
        hostfile: Path | None = None,
        agent: str | None = None,
        interface: str | None = None,
        bind: bool = True,
        locate: Locate | None = None,
        spans_hosts: bool | None = None,
    ) -> list[str]:
        """The launcher's command line up to the program: ``np`` ranks, each given the
        variables of ``env``; without ``hostfile`` all on this machine. ``agent``: the
        remote shell (default ssh); ``interface``: the one NIC the ranks talk over;
        ``bind=False``: ranks not bound to cores (hosts sharing one machine's cores);
        ``locate`` finds the shims (needed with ``interface``); ``spans_hosts``: the
        hostfile names more than one host (default: whether there is a hostfile)."""
        spans = hostfile is not None if spans_hosts is None else spans_hosts
        where = Placement(hostfile, agent, interface, bind, locate, spans)
        return self.command(np, env, where)

    @abstractmethod
    def command(self, np: int, env: dict[str, str], where: Placement) -> list[str]:
        """:meth:`argv` in this MPI's words."""

    @abstractmethod
    def hostfile(self, hosts: Sequence[str], slots: int) -> str:
        """The hostfile placing ranks round-robin over ``hosts``, ``slots`` per host."""

    @abstractmethod
    def version_argv(self) -> list[str]:
        """The command that prints the installed version (hostinfo)."""

    @abstractmethod
    def pinned_env(self, interface: str, locate: Locate) -> dict[str, str]:
        """For ranks started without the launcher (srun): the variables that keep them
        on TCP over ``interface``, between hosts that share one machine."""

    def launcher_env(self, env: dict[str, str]) -> dict[str, str]:
        """The launcher process's environment: ``env`` and, as root, the root variables."""
        if os.geteuid() == 0:
            return {**env, **dict.fromkeys(self.root_vars, "1")}
        return dict(env)

    def srun_flags(self) -> list[str]:
        """srun's flags that start this MPI's ranks (its PMI plug-in)."""
        return [f"--mpi={self.pmi_plugin}"]

    def io_driver_env(self, driver: str) -> dict[str, str]:
        """The variables that pin MPI-IO to ``driver`` (one of IO_DRIVERS): none where the
        MPI has one driver only."""
        return {}

    def tcp_buffer_env(self, size: int) -> dict[str, str]:
        """Its TCP socket buffers, send and receive alike, at ``size`` bytes."""
        return dict.fromkeys(self.tcp_buffer_vars, str(size))


@dataclass(frozen=True)
class OpenMPIFlavour(Flavour):
    def io_driver_env(self, driver):
        return {"OMPI_MCA_io": OPENMPI_IO_COMPONENTS[driver]}

    def mca(self, interface: str | None, shared_memory: bool, tcp: bool = True) -> dict[str, str]:
        """Its MCA parameters: transport pinned, yield when idle, on ``interface``;
        ``tcp``: ranks talk TCP (several hosts, or no shared memory): the event library
        is then ticked at every progress call."""
        params = {
            "pml": "ob1",
            "btl": "self,vader,tcp" if shared_memory else "self,tcp",
            "mpi_yield_when_idle": "1",
        }
        if tcp:  # 0 would mean never; one host's ranks keep shared memory's fast path
            params["mpi_event_tick_rate"] = "1"
        if interface:
            params.update(btl_tcp_if_include=interface, oob_tcp_if_include=interface)
        return params

    def command(self, np, env, where):
        argv = [self.launcher, "-np", str(np)]
        mca = self.mca(where.interface, shared_memory=True, tcp=where.spans_hosts)
        for name, value in mca.items():
            argv += ["--mca", name, value]
        if not where.bind:
            argv += ["--bind-to", "none"]
        if where.hostfile is None:
            argv += ["--oversubscribe"]
        else:
            argv += ["--hostfile", str(where.hostfile), "--map-by", "node"]
        if where.agent:
            argv += ["--mca", "plm_rsh_agent", where.agent]
        for name in sorted(env):
            argv += ["-x", name]  # exports the launcher's value of each variable to the ranks
        return argv

    def hostfile(self, hosts, slots):
        return "".join(f"{host} slots={slots}\n" for host in hosts)

    def version_argv(self):
        return [self.launcher, "--version"]

    def pinned_env(self, interface, locate):
        return {f"OMPI_MCA_{k}": v for k, v in self.mca(interface, shared_memory=False).items()}


@dataclass(frozen=True)
class MPICHFlavour(Flavour):
    def command(self, np, env, where):
        argv = [self.launcher, "-n", str(np)]
        if where.hostfile is not None:
            argv += ["-f", str(where.hostfile)]
        if where.agent:
            argv += ["-launcher", "rsh", "-launcher-exec", where.agent]
        genv = dict(env)
        if (
            where.interface
        ):  # pinned to one NIC means TCP: keep UCX off shared memory, avoid the hang
            if where.locate is None:
                raise ValueError("MPICH pinned to an interface needs locate for its shims")
            pinned = self.pinned_env(where.interface, where.locate)
            genv = {**pinned, **env, "LD_PRELOAD": pinned["LD_PRELOAD"]}
        for name in sorted(genv):
            argv += ["-genv", name, genv[name]]
        return argv

    def hostfile(self, hosts, slots):
        # one entry per host: hydra then cycles through them, i.e. round-robin like --map-by node
        return "".join(f"{host}:1\n" for host in hosts)

    def version_argv(self):
        return ["mpichversion"]

    def pinned_env(self, interface, locate):
        # a value the user exported wins (and is what the record's env knobs show)
        return {
            "UCX_TLS": os.environ.get("UCX_TLS", "tcp,self"),
            "UCX_NET_DEVICES": os.environ.get("UCX_NET_DEVICES", interface),
            "LD_PRELOAD": ":".join(str(locate(shim, self.name)) for shim in self.shims),
        }


OPENMPI = OpenMPIFlavour(
    name="openmpi",
    launcher="mpirun.openmpi",
    pmi_plugin="pmix",
    tcp_buffer_vars=("OMPI_MCA_btl_tcp_sndbuf", "OMPI_MCA_btl_tcp_rcvbuf"),  # its TCP BTL
    root_vars=("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"),
)
MPICH = MPICHFlavour(
    name="mpich",
    launcher="mpiexec.mpich",
    pmi_plugin="pmi2",
    tcp_buffer_vars=("UCX_TCP_SNDBUF", "UCX_TCP_RCVBUF"),  # Debian's MPICH is ch4:ucx: UCX's tcp
    shims=("libct_finalize_shim.so",),
)
FLAVOURS: dict[str, Flavour] = {f.name: f for f in (OPENMPI, MPICH)}
NAMES = tuple(FLAVOURS)  # every --mpi choice, the default first
DEFAULT = OPENMPI


def flavour(name: str) -> Flavour:
    """The flavour called ``name``; an unknown one is the user's error."""
    try:
        return FLAVOURS[name]
    except KeyError:
        raise UserError(f"unknown MPI {name!r} (known: {', '.join(NAMES)})") from None


def default_of(offered: Sequence[str]) -> str:
    """The MPI a step takes when the user names none: the default where the cluster
    offers it, else the cluster's first."""
    return DEFAULT.name if DEFAULT.name in offered else offered[0]
