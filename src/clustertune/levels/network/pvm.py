"""A PVM virtual machine over some hosts of a cluster, for ``net pingpong --layer pvm``.

The master pvmd is started on the first host through the cluster's launcher; it adds the
other hosts itself through ``PVM_RSH``, which on a virtual cluster is the cluster's agent
(the ssh stand-in MPI uses). Virtual hosts share one /tmp, where every pvmd keeps its
socket and address files (``pvmd.<uid>``), so each host gets its own ``PVM_TMP``,
chosen by a small wrapper from the host's name. The machine is halted and its files
removed on exit, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import select
import shlex
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from ...cluster import Cluster
from ...errors import UserError
from ...launch import launcher_for
from ...launch.process import kill_job

PVM_ROOT = "/usr/lib/pvm3"
PVMD = f"{PVM_ROOT}/lib/pvmd"
START_S = 20.0  # every pvmd must be up within this
HALT_S = 10.0


class PvmMachine:
    def __init__(self, cluster: Cluster, hosts: list[str], bin_dir: Path):
        if cluster.launcher not in ("vcluster", "local"):
            raise UserError(
                f"--layer pvm runs on virtual clusters and on this host; cluster "
                f"{cluster.name!r} uses the {cluster.launcher} launcher"
            )
        if not Path(PVMD).exists():
            raise UserError(f"{PVMD} missing: PVM is not installed (make setup)")
        self.cluster = cluster
        self.hosts = list(dict.fromkeys(hosts))
        self.bin_dir = bin_dir
        self.launcher = launcher_for(cluster)
        self.workdir: Path | None = None
        self.master: subprocess.Popen | None = None

    def env(self, host: str) -> dict[str, str]:
        """What a PVM task on ``host`` needs to find its pvmd."""
        assert self.workdir is not None
        env = {"PVM_ROOT": PVM_ROOT, "PVM_TMP": str(self._tmp(host))}
        if os.geteuid() == 0:
            env["PVM_ALLOW_ROOT"] = "1"  # pvmd refuses root otherwise
        return env

    def __enter__(self) -> PvmMachine:
        self.workdir = Path(tempfile.mkdtemp(prefix="clustertune-pvm-", dir="/tmp"))
        try:
            self._start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _start(self) -> None:
        assert self.workdir is not None
        rsh = self.cluster.extra.get("agent", "ssh")
        root = "export PVM_ALLOW_ROOT=1\n" if os.geteuid() == 0 else ""
        wrapper = self.workdir / "pvmd"
        wrapper.write_text(
            "#!/bin/sh\n# clustertune: one PVM_TMP per host (virtual hosts share /tmp)\n"
            f"{root}export PVM_ROOT={PVM_ROOT} PVM_RSH={shlex.quote(rsh)}\n"
            f'export PVM_TMP={shlex.quote(str(self.workdir))}/"$(hostname)"\n'
            f'exec {PVMD} "$@"\n'
        )
        wrapper.chmod(0o755)
        hostfile = self.workdir / "hostfile"
        hostfile.write_text(f"* dx={wrapper} ep={self.bin_dir}\n" + "\n".join(self.hosts) + "\n")
        for host in self.hosts:
            self._tmp(host).mkdir(exist_ok=True)
        self.master = self.launcher.spawn_on_host(self.hosts[0], [str(wrapper), str(hostfile)])
        deadline = time.monotonic() + START_S
        uid = os.geteuid()
        while time.monotonic() < deadline:
            if self.master.poll() is not None:
                break
            if all((self._tmp(h) / f"pvmd.{uid}").exists() for h in self.hosts):
                return
            select.select([], [], [], 0.1)
        missing = [h for h in self.hosts if not (self._tmp(h) / f"pvmd.{uid}").exists()]
        err = ""
        if self.master.poll() is not None:
            err = ": " + (self.master.stderr.read() or self.master.stdout.read()).strip()[-300:]
        raise UserError(f"cannot start PVM on {', '.join(missing) or 'the master'}{err}")

    def _tmp(self, host: str) -> Path:
        """The host's PVM_TMP: named as the wrapper's $(hostname) will name it (a virtual
        host's hostname is its name; this host's is its node name)."""
        assert self.workdir is not None
        return self.workdir / (os.uname().nodename if self.cluster.launcher == "local" else host)

    def __exit__(self, *exc) -> None:
        if self.master is not None:
            if self.master.poll() is None:
                self.launcher.run_on_host(
                    self.hosts[0], ["sh", "-c", "echo halt | pvm"], HALT_S, self.env(self.hosts[0])
                )
            try:
                self.master.communicate(timeout=HALT_S)
            except subprocess.TimeoutExpired:  # halt failed: kill every pvmd of this job
                kill_job(self.master, self.master.job_id)
                self.master.communicate()
        if self.workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)
