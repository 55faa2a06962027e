"""A PVM virtual machine over some hosts of a cluster, for ``net pingpong --layer pvm``.

The master pvmd is a service of the run on the first host; it adds the
other hosts itself through ``PVM_RSH``, which on a virtual cluster is the cluster's agent
(the ssh stand-in MPI uses). Virtual hosts share one /tmp, where every pvmd keeps its
socket and address files (``pvmd.<uid>``), so each host gets its own ``PVM_TMP``,
chosen by a small wrapper from the host's name. The machine is halted and its files
removed on exit, whatever happened.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from ...errors import UserError
from ...launch.service import Service
from ...runner import Run

PVM_ROOT = "/usr/lib/pvm3"
PVMD = f"{PVM_ROOT}/lib/pvmd"
START_S = 20.0  # every pvmd must be up within this
HALT_S = 10.0


class PvmMachine:
    def __init__(self, run: Run, hosts: list[str], bin_dir: Path):
        cluster = run.cluster
        if cluster.launcher not in ("vcluster", "local"):
            raise UserError(
                f"--layer pvm runs on virtual clusters and on this host; cluster "
                f"{cluster.name!r} uses the {cluster.launcher} launcher"
            )
        if not Path(PVMD).exists():
            raise UserError(f"{PVMD} missing: PVM is not installed (make setup)")
        self.run = run
        self.cluster = cluster
        self.hosts = list(dict.fromkeys(hosts))
        self.bin_dir = bin_dir
        self.workdir: Path | None = None
        self.master = None  # the run's service block of the master pvmd, once started

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
        uid = os.geteuid()
        self.master = self.run.service(
            self.hosts[0],
            [str(wrapper), str(hostfile)],
            what=f"pvmd on {self.hosts[0]}",
            ready=lambda: all((self._tmp(h) / f"pvmd.{uid}").exists() for h in self.hosts),
            start_timeout=START_S,
            stop_grace=HALT_S,
        )
        try:
            self.master.__enter__()
        except UserError as exc:
            missing = [h for h in self.hosts if not (self._tmp(h) / f"pvmd.{uid}").exists()]
            raise UserError(f"cannot start PVM on {', '.join(missing)}: {exc}") from None

    def _tmp(self, host: str) -> Path:
        """The host's PVM_TMP: named as the wrapper's $(hostname) will name it (a virtual
        host's hostname is its name; this host's is its node name)."""
        assert self.workdir is not None
        return self.workdir / (os.uname().nodename if self.cluster.launcher == "local" else host)

    def __exit__(self, *exc) -> None:
        master: Service | None = self.master and self.master.service
        if master is not None and master.running:  # halted politely; killed after HALT_S
            self.run.launcher.run_on_host(
                self.hosts[0], ["sh", "-c", "echo halt | pvm"], HALT_S, self.env(self.hosts[0])
            )
        if self.master is not None:
            self.master.__exit__(None, None, None)
        if self.workdir is not None:
            with contextlib.suppress(OSError):
                shutil.rmtree(self.workdir)
