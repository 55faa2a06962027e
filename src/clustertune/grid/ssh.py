"""A site reached only over ssh: sshd on every host of the site, inside its namespace,
with the site's own host key, accepting only the grid's key (authorized_keys under the
site's directory). Nothing reads or writes root's ~/.ssh: the client runs through a
wrapper (``<grid>/ssh``) with its own identity, known-hosts file and no config file.

sshd wants its privilege-separation directory /run/sshd (created if missing) and an
absolute path; StrictModes is off because the keys live under /run/clustertune.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from ..errors import UserError
from . import daemons

PORT = 22
SSHD = "/usr/sbin/sshd"
PASSED_ENV = ("CLUSTERTUNE_JOB", "CLUSTERTUNE_OWNER")  # a timed-out job's ranks stay findable


def user_key(grid_dir: Path) -> Path:
    """The grid's identity (made once per grid)."""
    key = grid_dir / "ssh" / "id_ed25519"
    if not key.is_file():
        key.parent.mkdir(parents=True, exist_ok=True)
        _keygen(key, "clustertune-grid")
    return key


def wrapper(grid_dir: Path) -> Path:
    """``<grid>/ssh HOST COMMAND``: ssh with the grid's key and known hosts only."""
    path = grid_dir / "ssh" / "ssh"
    key = user_key(grid_dir)
    known = grid_dir / "ssh" / "known_hosts"
    known.touch()
    send = " ".join(f"-o SendEnv={v}" for v in PASSED_ENV)
    path.write_text(
        "#!/bin/sh\n# clustertune grid: ssh with the grid's identity, never ~/.ssh\n"
        f"exec ssh -F none -i {key} -o IdentitiesOnly=yes -o BatchMode=yes "
        f"-o UserKnownHostsFile={known} -o GlobalKnownHostsFile=/dev/null "
        f'-o StrictHostKeyChecking=yes -o LogLevel=ERROR -o ConnectTimeout=5 {send} "$@"\n'
    )
    path.chmod(0o755)
    return path


def _keygen(path: Path, comment: str) -> None:
    out = subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise UserError(f"ssh-keygen: {out.stderr.strip()}")


def start(grid: str, site: dict, timeout: float = 15.0) -> None:
    if not Path(SSHD).is_file() or shutil.which("ssh") is None:
        raise UserError(f"site {site['name']}: sshd not installed (apt-get install openssh-server)")
    d = Path(site["dir"]) / "ssh"
    d.mkdir(parents=True, exist_ok=True)
    grid_dir = Path(site["dir"]).parent
    hostkey = d / "host_ed25519"
    _keygen(hostkey, f"{grid} {site['name']} host key")
    shutil.copy(user_key(grid_dir).with_suffix(".pub"), d / "authorized_keys")
    wrapper(grid_dir)
    names = ",".join(n for h in site["hosts"] for n in (h["name"], h["address"]))
    with (grid_dir / "ssh" / "known_hosts").open("a") as known:
        known.write(
            f"{names} {hostkey.with_suffix('.pub').read_text().split(' ', 2)[0]} "
            f"{hostkey.with_suffix('.pub').read_text().split(' ', 2)[1]}\n"
        )
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    log = d / "sshd.log"
    for h in site["hosts"]:
        conf = d / f"sshd-{h['name']}.conf"
        conf.write_text(
            "\n".join(
                [
                    f"Port {PORT}",
                    f"ListenAddress {h['address']}",
                    f"HostKey {hostkey}",
                    f"AuthorizedKeysFile {d / 'authorized_keys'}",
                    f"PidFile {d / h['name']}.pid",
                    "PermitRootLogin prohibit-password",
                    "PasswordAuthentication no",
                    "KbdInteractiveAuthentication no",
                    "UsePAM no",
                    "StrictModes no",
                    "PrintMotd no",
                    "UseDNS no",
                    f"AcceptEnv {' '.join(PASSED_ENV)}",
                    "",
                ]
            )
        )
        site["pids"][f"sshd-{h['name']}"] = daemons.start(
            grid, h["namespace"], [SSHD, "-D", "-e", "-f", str(conf)], log, uts=h["name"]
        )
    wrap = wrapper(grid_dir)

    def answering() -> bool:
        for h in site["hosts"]:
            argv = daemons.in_namespace(
                site["hosts"][0]["namespace"], [str(wrap), h["name"], "true"]
            )
            if subprocess.run(argv, capture_output=True, timeout=10).returncode != 0:
                return False
        return True

    daemons.wait_for(
        f"site {site['name']}: sshd answering", answering, timeout, site["pids"], {"sshd": log}
    )


def argv_on(grid_dir: Path, from_ns: str, host: str, command: str) -> list[str]:
    """Run a shell command on ``host`` of an ssh site, from namespace ``from_ns``."""
    return daemons.in_namespace(from_ns, [str(grid_dir / "ssh" / "ssh"), host, command])
