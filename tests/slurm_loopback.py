"""A throw-away Slurm cluster on loopback, for tests: private munged, one slurmctld, and
one slurmd per pseudo-node, all under one work directory; nothing under /etc.

Clients find it through ``SLURM_CONF`` (see :attr:`SlurmLoopback.conf`). Each slurmd runs
in its own UTS namespace named after its node, so a rank's ``gethostname()`` tells which
pseudo-node it ran on. Debian's Slurm 22.05 is built with MULTIPLE_SLURMD, which needs a
port per node and ``%n`` in the spool, TmpFS (PMIx app dirs), pid and log paths.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from clustertune.grid import slurm

DAEMONS = ("munged", "mungekey", "slurmctld", "slurmd", "srun", "scontrol", "sinfo", "unshare")
MARK = "CT_SLURM_LOOPBACK"  # in the environment of every daemon we start (and slurmstepd)


def unavailable() -> str | None:
    """Why a loopback Slurm cannot be stood up here, or None."""
    if os.geteuid() != 0:
        return "needs root (slurmd runs as root, one UTS namespace per pseudo-node)"
    missing = [p for p in DAEMONS if shutil.which(p) is None]
    if missing:
        return f"Slurm/munge not installed ({', '.join(missing)} missing): make apt"
    return None


def free_ports(count: int) -> list[int]:
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def alive(pid: int) -> bool:
    """PID 1 may not reap orphans here: a zombie counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def parent(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None


def stop(pid: int, wait: float = 10.0) -> None:
    """SIGTERM, wait up to ``wait`` s (slurmctld saves its state), then SIGKILL."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + wait
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    if alive(pid):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)


def tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()[-lines:]
    except OSError:
        return f"--- {path.name}: (none)"
    return "\n".join([f"--- {path.name}:", *text])


class SlurmLoopback:
    def __init__(self, workdir: Path, nodes: tuple[str, ...] = ("n1", "n2"), partition="debug"):
        self.dir = Path(workdir)
        self.nodes = nodes
        self.partition = partition
        self.conf = self.dir / "slurm.conf"
        # munged wants every directory above its socket searchable by all (pytest's tmp
        # dirs are 0700) and a socket path fits in 108 bytes: its own directory in /tmp
        self.munge = Path(tempfile.mkdtemp(prefix="ct-munge-"))
        self.sock = self.munge / "sock"
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def env(self) -> dict[str, str]:
        return {"SLURM_CONF": str(self.conf)}

    def _daemon_env(self) -> dict[str, str]:
        return {**os.environ, **self.env, MARK: str(self.dir)}

    def client(self, *argv: str, timeout: float = 10.0) -> subprocess.CompletedProcess:
        return subprocess.run(
            argv, env={**os.environ, **self.env}, capture_output=True, text=True, timeout=timeout
        )

    def logs(self) -> str:
        log = self.dir / "log"
        names = ["slurmctld.log", *(f"slurmd-{n}.log" for n in self.nodes)]
        parts = [tail(log / n) for n in names] + [tail(self.munge / "munged.log", 5)]
        return "\n".join(parts)

    def write_conf(self) -> None:
        ctld, slurmd, *node_ports = free_ports(2 + len(self.nodes))
        host = socket.gethostname().split(".")[0]
        # MULTIPLE_SLURMD: every pseudo-node on this host, each slurmd on its own port
        nodes = [
            {"NodeName": node, "NodeHostname": host, "NodeAddr": "127.0.0.1", "Port": port}
            for node, port in zip(self.nodes, node_ports, strict=True)
        ]
        slurm.write_conf_file(
            self.conf,
            "ctloop",
            f"{host}(127.0.0.1)",
            (ctld, slurmd),
            self.sock,
            nodes,
            os.cpu_count() or 2,
            self.partition,
        )

    def _wait(self, what: str, ready, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    out = tail(self.dir / "log" / f"{name}.out")
                    raise RuntimeError(
                        f"{name} exited ({proc.returncode}) before {what}\n"
                        + self.logs()
                        + "\n"
                        + out
                    )
            time.sleep(0.2)
        raise RuntimeError(
            f"loopback Slurm: {what} not reached within {timeout:.0f} s\n" + self.logs()
        )

    def node_states(self) -> dict[str, str]:
        out = self.client("sinfo", "-h", "-N", "-o", "%N %t").stdout
        return dict(line.split() for line in out.splitlines() if len(line.split()) == 2)

    def start(self, timeout: float = 30.0) -> None:
        for sub in ("state", "log", "spool", "tmp"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        m = self.munge
        m.chmod(0o755)
        for argv in (
            ["mungekey", "-c", "-k", str(m / "munge.key")],  # private key, owned by root
            [
                "munged",
                f"--key-file={m / 'munge.key'}",
                f"--socket={self.sock}",
                f"--pid-file={m / 'munged.pid'}",
                f"--log-file={m / 'munged.log'}",
                f"--seed-file={m / 'seed'}",
            ],
        ):
            done = subprocess.run(argv, capture_output=True, text=True, env=self._daemon_env())
            if done.returncode != 0:
                raise RuntimeError(f"{argv[0]} failed: {done.stderr.strip()}")
        self.write_conf()
        log = self.dir / "log"
        self._spawn("slurmctld", ["slurmctld", "-D", "-f", str(self.conf)], log / "slurmctld.out")
        self._wait("slurmctld UP", lambda: "UP" in self.client("scontrol", "ping").stdout, timeout)
        for node in self.nodes:
            # a private UTS name per pseudo-node: ranks see it through gethostname()
            inner = f'hostname {node} && exec slurmd -D -N {node} -f "$1"'
            argv = ["unshare", "--uts", "sh", "-c", inner, "sh", str(self.conf)]
            self._spawn(f"slurmd-{node}", argv, log / f"slurmd-{node}.out")
        self._wait(
            f"nodes {','.join(self.nodes)} idle",
            lambda: self.node_states() == dict.fromkeys(self.nodes, "idle"),
            timeout,
        )

    def _spawn(self, name: str, argv: list[str], out: Path) -> None:
        with out.open("w") as sink:
            self.procs[name] = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                env=self._daemon_env(),
                start_new_session=True,
            )

    def _with_env(self, *needles: bytes) -> list[int]:
        pids = []
        for entry in Path("/proc").iterdir():
            try:
                if entry.name.isdigit():
                    env = (entry / "environ").read_bytes().split(b"\0")
                    if any(n in env for n in needles):
                        pids.append(int(entry.name))
            except OSError:
                continue
        return [p for p in pids if alive(p)]

    def marked(self) -> list[int]:
        """Processes started by this cluster (daemons, slurmstepd) still alive."""
        return self._with_env(f"{MARK}={self.dir}".encode())

    def strays(self) -> list[int]:
        """Job processes still alive: srun, slurmstepd, ranks (anything but the daemons).

        srun and the ranks it exports its environment to carry our SLURM_CONF; slurmstepd
        inherits the daemons' mark. This process set SLURM_CONF through os.environ, which
        /proc does not show, but is excluded anyway."""
        daemons = {p.pid for p in self.procs.values()} | {os.getpid()}
        with contextlib.suppress(OSError, ValueError):
            daemons.add(int((self.munge / "munged.pid").read_text().split()[0]))
        found = self._with_env(f"{MARK}={self.dir}".encode(), f"SLURM_CONF={self.conf}".encode())
        return [p for p in found if p not in daemons and parent(p) not in daemons]  # slurmscriptd

    def stop(self) -> None:
        """Stop everything, slurmd first, slurmctld waited for (it saves its state)."""
        for proc in reversed(list(self.procs.values())):  # slurmd..., then slurmctld
            stop(proc.pid)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=1)
        pidfile = self.munge / "munged.pid"
        if pidfile.exists():
            with contextlib.suppress(ValueError):
                stop(int(pidfile.read_text().split()[0]))
        for pid in self.marked():  # stray slurmstepd
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.procs.clear()
        shutil.rmtree(self.munge, ignore_errors=True)


@contextlib.contextmanager
def slurm_loopback(workdir: Path, nodes: tuple[str, ...] = ("n1", "n2")):
    cluster = SlurmLoopback(workdir, nodes)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
