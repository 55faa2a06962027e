"""Remote collective I/O (seeds/004): the benchmark's ncmpi_* calls made on one cluster and
performed by ct-io-server (OpenMPI + PnetCDF) on another, over mutual TLS.

``clustertune io netcdf --remote SITE`` starts the server as a service (launch/service.py)
on the first host of SITE for the run, the client job (ct-io-fwd, either MPI) on the other
sites' hosts, and checks the files on the server's side; ``--remote HOST:PORT`` uses a
server already running (``clustertune io serve``). Certificates come from the CA directory
(security.py); with ``--remote SITE`` the CA, a server certificate, the client identity and
its grid-mapfile line are made when missing.

Knobs (recorded in params and, as CT_NCFWD_*, in the record's env): ``--servers S`` server
ranks (default: one per client rank, the paper; fewer aggregates), ``--no-batch`` (one round
trip per metadata call, the paper), ``--session file`` (a session per open/close) and
``--server-round B`` (the server's put/get rounds; 0: store and forward, the paper).
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import tempfile
from pathlib import Path

from ... import kernels, security
from ...cluster import Cluster
from ...errors import UserError
from ...launch import mpi
from ...launch.launchers import launcher_for
from . import SERVER_KERNEL

READY = re.compile(rb"ct-io-server: listening on port (\d+)")
SERVER_START_S = 30.0
SERVER_NAME = "server"  # the server's certificate in the CA directory
SERVER_HOSTS = ("localhost", "127.0.0.1")  # its subjectAltName when made here
HANDSHAKE_S = 10.0  # a connection's TLS handshake and HELLO, at most (ct-io-server)
EXPORT_PREFIX = "clustertune-io-export-locked-"  # locked: see export_dir
SERVER_MPI = mpi.OPENMPI  # Debian's PnetCDF links Open MPI
_held: dict[Path, int] = {}  # this process's export areas, each with the fd holding its lock


def server_env(driver: str = "romio") -> dict[str, str]:
    """The server's mpirun's environment: its MPI-IO driver (and what Open MPI needs as root)."""
    return SERVER_MPI.launcher_env(SERVER_MPI.io_driver_env(driver))


def server_argv(
    np: int,
    export: Path,
    ca_dir: Path,
    *,
    port: int = 0,
    sessions: int = 0,
    idle_timeout: float = 60.0,
    env: dict[str, str] | None = None,
    round_bytes: int | None = None,
    handshake_timeout: float = HANDSHAKE_S,
    max_session_memory: int | None = None,
) -> list[str]:
    """mpirun of ct-io-server's ranks on one host (an I/O node), its certificate and the CA's
    CRL from ca_dir. ``round_bytes``: a put's or get's bytes per client per round (the
    server's default, 4 MiB, when None; 0: each block crosses the link whole before its write
    or after its read). ``max_session_memory``: the request buffers one server rank may hold
    (the server's default, half the host's memory shared by its ranks, when None)."""
    creds = security.credentials(ca_dir, SERVER_NAME)
    head = SERVER_MPI.argv(np, env or server_env())
    return (
        head
        + [
            str(kernels.kernel_path(SERVER_KERNEL, SERVER_MPI.name)),
            "--export",
            str(export),
            "--cert",
            str(creds.cert),
            "--key",
            str(creds.key),
            "--ca",
            str(creds.ca),
            "--gridmap",
            str(ca_dir / security.GRIDMAP),
            "--crl",
            str(security.crl_file(ca_dir)),
            "--port",
            str(port),
            "--sessions",
            str(sessions),
            "--idle-timeout",
            f"{idle_timeout:g}",
            "--handshake-timeout",
            f"{handshake_timeout:g}",
        ]
        + (["--round", str(round_bytes)] if round_bytes is not None else [])
        + (
            ["--max-session-memory", str(max_session_memory)]
            if max_session_memory is not None
            else []
        )
    )


def prepare_ca(ca_dir: Path, identity: str) -> security.Credentials:
    """The CA, the server's certificate and the client identity, made when missing; the
    identity granted the whole export in the grid-mapfile when it has no line yet."""
    security.init_ca(ca_dir)
    if not (ca_dir / f"{SERVER_NAME}.pem").is_file():
        security.issue(ca_dir, SERVER_NAME, server=True, hosts=SERVER_HOSTS)
    if not (ca_dir / f"{identity}.pem").is_file():
        security.issue(ca_dir, identity)
    subject = security.dn_of(identity)
    if subject not in security.gridmap_entries(ca_dir / security.GRIDMAP):
        security.grant(ca_dir, subject, ".", "rw")
    return security.credentials(ca_dir, identity)


def parse_remote(cluster: Cluster, text: str) -> tuple[str | None, str | None]:
    """(site, None) or (None, "host:port")."""
    names = [s.name for s in cluster.sites]
    if text in names:
        return text, None
    host, _, port = text.rpartition(":")
    if host and port.isdigit() and 0 < int(port) < 65536:
        return None, text
    raise UserError(
        f"--remote {text!r}: a site of cluster {cluster.name!r} ({', '.join(names)}) or HOST:PORT"
    )


def site_hosts(cluster: Cluster, site: str) -> tuple[str, list[str]]:
    """The server's host (first of the site) and the client hosts (every other site's)."""
    server = [h.name for h in cluster.hosts if h.site == site]
    clients = [h.name for h in cluster.hosts if h.site != site]
    if not clients:
        raise UserError(
            f"--remote {site}: cluster {cluster.name!r} has no host outside it for the client job"
        )
    return server[0], clients


def address_of(cluster: Cluster, host: str) -> str:
    return cluster.host(host).address or "127.0.0.1"


def export_dir() -> Path:
    """A new export area in /tmp for a ``--remote SITE`` run; the run removes it.

    This process holds a flock on it while it lives, and the kernel drops the lock when
    the process dies, SIGKILL included: so each call first removes the areas nobody holds
    (left by a killed run) and never one a live run holds. The name differs from the
    areas of earlier versions, which hold no lock and are never removed here."""
    for path, fd in list(_held.items()):  # areas their runs have removed
        if not path.exists():
            os.close(fd)
            del _held[path]
    for stale in Path("/tmp").glob(EXPORT_PREFIX + "*"):
        try:
            fd = os.open(stale, os.O_RDONLY | os.O_DIRECTORY)
        except OSError:
            continue  # removed meanwhile
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            shutil.rmtree(stale, ignore_errors=True)
        except BlockingIOError:
            pass  # a live run's
        finally:
            os.close(fd)
    while True:
        path = Path(tempfile.mkdtemp(prefix=EXPORT_PREFIX, dir="/tmp"))
        try:
            fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            continue  # another run's sweep took it before it was locked
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            if os.path.samestat(os.fstat(fd), os.stat(path)):  # still there, still ours
                break
        except FileNotFoundError:
            pass
        os.close(fd)
    _held[path] = fd
    path.chmod(0o755)
    return path


def link_shares(samples: list[dict], link_bps: int | None) -> dict[str, dict[str, float]]:
    """Per size and op: throughput over the open-to-close minimum as a share of the nominal
    inter-site link (8 * bytes / time / link_bps; the issue's target: >= 0.8 at 256^3)."""
    if not link_bps:
        return {}
    out: dict[str, dict[str, float]] = {}
    for s in samples:
        if "open_to_close_s" in s and s.get("mode") == "collective":
            share = 8 * s["bytes"] / s["open_to_close_s"]["min"] / link_bps
            out.setdefault(str(s["size"]), {})[s["op"]] = share
    return out


def client_env(creds: security.Credentials, server: str, batch: bool, session: str) -> dict:
    """libct_ncfwd's variables. The server must present the CA directory's server
    certificate (its subject pinned): any other certificate of the CA, a user's or another
    server's, is refused by the client."""
    return {
        **creds.env(),
        "CT_NCFWD_SERVER": server,
        "CT_NCFWD_BATCH": "1" if batch else "0",
        "CT_NCFWD_SESSION": session,
        "CT_NCFWD_SERVER_SUBJECT": security.dn_of(SERVER_NAME, server=True),
    }


def serve(
    cluster: Cluster,
    host: str,
    *,
    np: int,
    export: Path,
    ca_dir: Path,
    port: int,
    sessions: int,
    idle_timeout: float,
    lifetime: float | None,
    driver: str = "romio",
    round_bytes: int | None = None,
    handshake_timeout: float = HANDSHAKE_S,
    max_session_memory: int | None = None,
) -> int:
    """``clustertune io serve``: the server in the foreground until it ends (after
    ``sessions``), ``lifetime`` passes, or Ctrl-C. Its exit status."""
    import sys
    import time

    if not export.is_dir():
        raise UserError(f"--export {export}: not a directory")
    security.credentials(ca_dir, SERVER_NAME)  # its certificate exists
    argv = server_argv(
        np,
        export.resolve(),
        ca_dir,
        port=port,
        sessions=sessions,
        idle_timeout=idle_timeout,
        env=server_env(driver),
        round_bytes=round_bytes,
        handshake_timeout=handshake_timeout,
        max_session_memory=max_session_memory,
    )
    launcher = launcher_for(cluster)
    service = launcher.service(
        host,
        argv,
        ready=READY,
        env=server_env(driver),
        start_timeout=SERVER_START_S,
        lifetime=lifetime,
        what=f"ct-io-server on {host}",
    )
    with service as s:
        assert s.ready_match is not None
        print(
            f"ct-io-server on {host} ({address_of(cluster, host)}) port "
            f"{int(s.ready_match.group(1))}, {np} ranks, export {export}",
            flush=True,
        )
        while s.running:
            time.sleep(0.5)
    done = s.completed
    assert done is not None
    sys.stderr.write(done.stderr)
    return 0 if done.returncode == 0 else 1
