"""Remote netCDF I/O: an MPICH client job writing and reading through ct-io-server (OpenMPI
+ PnetCDF) over mutual TLS, locally and across the two sites of a virtual cluster; clients
without a valid certificate, path escapes, malformed frames and a client killed mid-write
are refused or survived, and the server goes on serving the next client."""

from __future__ import annotations

import os
import random
import re
import shutil
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path

import netCDF4
import numpy as np
import pytest

from clustertune import kernels, security
from clustertune.cluster import local_cluster
from clustertune.launch.launchers import launcher_for
from clustertune.levels.io import netcdf, remote, section, validate

NC_INT, NC_EACCESS, NC_ENOMEM, NC_ENOENT, NC_EINVAL = 4, -77, -61, -220, -36
HANDSHAKE_S = 2.0  # the test server's --handshake-timeout


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> Path:
    # the kernels are built by 'make setup': missing ones are an error, never a skip
    kernels.kernel_path("ct-io-server", "openmpi")
    kernels.kernel_path("ct-io-fwd", "mpich")
    d = tmp_path_factory.mktemp("ca")
    remote.prepare_ca(d, "alice")
    security.issue(d, "mallory")  # a valid certificate the grid-mapfile does not name
    security.issue(d, "reader")  # read-only, the whole export
    security.grant(d, security.dn_of("reader"), ".", "ro")
    security.issue(d, "bob")  # an area that is a symlink leading out of the export
    security.grant(d, security.dn_of("bob"), "escape", "rw")
    security.grant(d, security.dn_of("eve"), ".", "rw")
    return d


@pytest.fixture(scope="module")
def foreign_ca(tmp_path_factory) -> Path:
    foreign = tmp_path_factory.mktemp("foreign-ca")
    security.init_ca(foreign)
    security.issue(foreign, "eve")  # same subject as the granted eve, another CA
    return foreign


def serving(argv: list[str], lifetime: float = 120):
    """ct-io-server as ``argv`` runs it, a service on this host (ready: its port line)."""
    return launcher_for(local_cluster()).service(
        local_cluster().hosts[0].name,
        argv,
        ready=remote.READY,
        env=remote.server_env(),
        lifetime=lifetime,
        stop_grace=0.5,
    )


@pytest.fixture(scope="module")
def server(ca, tmp_path_factory):
    """A running ct-io-server (2 ranks) on this host; yields (port, export, its log). Its
    export holds "escape", a symlink to a directory outside (export.parent / "outside0")."""
    export = tmp_path_factory.mktemp("export")
    (export / "sub").mkdir()
    outside = tmp_path_factory.mktemp("outside")
    (outside / "precious").write_text("not the server's to touch")
    (export / "escape").symlink_to(outside)
    argv = remote.server_argv(2, export, ca, idle_timeout=5, handshake_timeout=HANDSHAKE_S)
    with serving(argv, lifetime=600) as s:
        yield int(s.ready_match.group(1)), export, s
    assert s.completed is not None


def log_of(service, until: str | None = None, timeout: float = 10.0) -> str:
    """What the server has said so far (stderr after the ready line is drained in a thread);
    with ``until``, waits up to ``timeout`` for that text (the thread may lag the reply)."""
    deadline = time.monotonic() + timeout
    while True:
        chunks = service._drains["stderr"][1]
        log = (service._early_stderr + b"".join(chunks)).decode(errors="replace")
        if until is None or until in log or time.monotonic() > deadline:
            return log
        time.sleep(0.05)


def measure(port: int, ca: Path, **kw) -> dict:
    from clustertune.results import Store

    store = Store(kw.pop("db"))
    args = dict(
        np=2,
        mpi="mpich",
        sizes=[16, 24],
        mode="both",
        ops=["write", "read"],
        fmt="cdf2",
        reps=2,
        remote=f"127.0.0.1:{port}",
        ca_dir=ca,
        identity="alice",
    )
    return netcdf.measure(local_cluster(), store, **(args | kw))


def test_mpich_client_openmpi_server_write_and_read(server, ca, tmp_path) -> None:
    port, export, _ = server
    record = measure(port, ca, db=tmp_path / "r.db", directory="sub")
    assert record["status"] == "ok", record["error"]
    rows = netcdf.results(record)
    assert len(rows) == 8 and all(r["valid"] and r["remote"] == f"127.0.0.1:{port}" for r in rows)
    assert "MPICH" in record["detail"]["mpi_library"] and record["detail"]["remote"] is True
    for mode in ("collective", "independent"):
        f = export / "sub" / f"ct_io_netcdf_24_{mode}.nc"
        with netCDF4.Dataset(f) as ds:
            assert ds.data_model == "NETCDF3_64BIT_OFFSET"
            assert np.array_equal(ds["data"][:], validate.expected(24))
    assert not list((export / "sub").glob(".*ct-partial*"))
    # the paper's forwarding: one round trip per call, a session per open/close, OpenMPI too
    record = measure(
        port,
        ca,
        db=tmp_path / "r.db",
        directory="sub",
        mpi="openmpi",
        batch=False,
        session="file",
        sizes=[16],
    )
    assert record["status"] == "ok", record["error"]


def test_a_relative_ca_dir_is_resolved(server, ca, tmp_path, monkeypatch) -> None:
    """``--ca-dir ca`` names the directory from where the command runs: the client's and
    server's certificate paths are absolute, as they start in other working directories."""
    port, _, _ = server
    monkeypatch.chdir(ca.parent)
    record = measure(port, Path(ca.name), db=tmp_path / "r.db", directory="sub", sizes=[16])
    assert record["status"] == "ok", record["error"]
    for key in ("CT_NCFWD_CERT", "CT_NCFWD_KEY", "CT_NCFWD_CA"):
        got = Path(record["meta"]["env"][key])
        assert got.is_absolute() and got.parent == ca.resolve()


@pytest.mark.parametrize("round_bytes", [4096, 0])
def test_rounds_and_store_and_forward_with_aggregation(ca, tmp_path, round_bytes) -> None:
    """One server rank for two client ranks of 13 and 12 planes of 25^2 ints: in rounds of one
    plane (more rounds for one client than the other) and whole blocks (--round 0)."""
    export = tmp_path / "export"
    export.mkdir()
    argv = remote.server_argv(1, export, ca, idle_timeout=5, round_bytes=round_bytes)
    with serving(argv) as s:
        port = int(s.ready_match.group(1))
        record = measure(port, ca, db=tmp_path / "r.db", sizes=[25], mpi="openmpi", directory=".")
        assert record["status"] == "ok", f"{record['error']}\n{log_of(s)}"
    assert all(r["valid"] for r in netcdf.results(record))
    for mode in ("collective", "independent"):
        with netCDF4.Dataset(export / f"ct_io_netcdf_25_{mode}.nc") as ds:
            assert np.array_equal(ds["data"][:], validate.expected(25))


def frame(op: int, payload: bytes = b"", *, magic: bytes = b"CTIO", version: int = 1) -> bytes:
    return magic + struct.pack("<HHI", version, op, len(payload)) + payload


def text(s: str) -> bytes:
    return struct.pack("<I", len(s)) + s.encode()


def tls(ca: Path, name: str, port: int, ca_of_name: Path | None = None) -> ssl.SSLSocket:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.load_verify_locations(ca / "ca.pem")
    if name:
        d = ca_of_name or ca
        ctx.load_cert_chain(d / f"{name}.pem", d / f"{name}.key")
    raw = socket.create_connection(("127.0.0.1", port), timeout=10)
    return ctx.wrap_socket(raw)


def reply(sock) -> int:
    head = b""
    while len(head) < 12:
        chunk = sock.recv(12 - len(head))
        if not chunk:
            raise ConnectionError("closed")
        head += chunk
    length = struct.unpack("<I", head[8:12])[0]
    body = b""
    while len(body) < length:
        body += sock.recv(length - len(body))
    return struct.unpack("<i", body[:4])[0]


def reply_frame(sock) -> tuple[int, bytes]:
    """A whole reply: its status and the payload after it (the frame's length checked)."""
    head = recv_exactly(sock, 12)
    assert head[:4] == b"CTIO" and struct.unpack("<H", head[6:8])[0] == 100
    length = struct.unpack("<I", head[8:12])[0]
    assert 4 <= length <= 65536
    body = recv_exactly(sock, length)
    return struct.unpack("<i", body[:4])[0], body[4:]


def recv_exactly(sock, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def hello(sock, token: int | None = None) -> int:
    token = random.getrandbits(64) if token is None else token
    sock.sendall(frame(1, struct.pack("<IIQ", 0, 1, token)))
    return reply(sock)


def alice_answered_in(ca: Path, port: int) -> float:
    """Seconds from alice's connect to the answer of her HELLO (a one-rank session that
    ends at once): how long whatever else is connected delays a legitimate client."""
    started = time.monotonic()
    s = tls(ca, "alice", port)
    assert hello(s) == 0
    answered = time.monotonic() - started
    s.sendall(frame(17))
    s.close()
    return answered


def test_clients_without_a_valid_certificate_are_refused(server, ca, foreign_ca, tmp_path) -> None:
    port, _, service = server
    for name, other in (("", None), ("eve", foreign_ca)):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            s = tls(ca, name, port, other)
            hello(s)  # TLS 1.3: the server's verdict arrives with the first read
    # a valid certificate that the grid-mapfile does not name
    s = tls(ca, "mallory", port)
    assert hello(s) == NC_EACCESS
    s.close()
    mallory = security.dn_of("mallory")
    log = log_of(service, until=f"{mallory}: subject not in the grid-mapfile")
    assert f"refused {mallory}: subject not in the grid-mapfile" in log
    assert (
        "refused a client: TLS handshake: error:0A0000C7:SSL routines::peer did not return a certificate"
        in log
    )
    assert "refused CN=eve,OU=user,O=clustertune,C=JP: TLS handshake: certificate refused" in log
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


@pytest.mark.parametrize(
    ("directory", "why"),
    [
        ("../up", "contains .."),
        ("/tmp", "outside the export area"),
        ("escape", "passes through a symlink"),
    ],
)
def test_path_escapes_are_refused(server, ca, tmp_path, directory, why) -> None:
    port, export, service = server
    record = measure(
        port,
        ca,
        db=tmp_path / "r.db",
        sizes=[16],
        mode="collective",
        ops=["write"],
        directory=directory,
    )
    assert record["status"] == "failed" and "access refused" in record["error"]
    assert why in log_of(service, until=why)
    outside = (export / "escape").resolve()
    assert outside.is_dir() and outside != export / "escape"
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


def start_write(
    ca: Path, port: int, name: str, n: int, token: int | None = None, who: str = "alice"
) -> ssl.SSLSocket:
    """A session writing ``name`` (one int variable of n values): up to its PUT, whose n*4
    bytes of DATA the caller sends."""
    s = tls(ca, who, port)
    assert hello(s, token) == 0
    s.sendall(frame(2, struct.pack("<ii", 0, 0) + text(name)))
    assert reply(s) == 0
    s.sendall(frame(5, struct.pack("<i", 0) + text("x") + struct.pack("<q", n)))
    assert reply(s) == 0
    s.sendall(frame(6, struct.pack("<i", 0) + text("data") + struct.pack("<iIi", NC_INT, 1, 0)))
    assert reply(s) == 0
    s.sendall(frame(7, struct.pack("<i", 0)))
    assert reply(s) == 0
    s.sendall(frame(13, struct.pack("<iiBIqq", 0, 0, 1, 1, 0, n)))
    return s


def test_the_client_finalize_runs_a_preloaded_one_after_its_bye(server, ca, tmp_path) -> None:
    """libct_ncfwd's MPI_Finalize ends the session, then calls the next MPI_Finalize: on a
    virtual cluster MPICH jobs preload the finalize shim (openucx/ucx#8738), which the
    client's own definition used to hide."""
    port, _, service = server
    shim = tmp_path / "shim.c"
    shim.write_text(
        "#include <mpi.h>\n#include <stdio.h>\n"
        'int MPI_Finalize(void) { fputs("preloaded finalize\\n", stderr); '
        "return PMPI_Finalize(); }\n"
    )
    subprocess.run(
        ["mpicc.mpich", "-shared", "-fPIC", "-o", str(tmp_path / "shim.so"), str(shim)], check=True
    )
    env = os.environ | remote.client_env(
        security.credentials(ca, "alice"), f"127.0.0.1:{port}", True, "job"
    )
    env["LD_PRELOAD"] = str(tmp_path / "shim.so")
    log = log_of(service)
    before, ended = log.count("unexpected eof"), log.count(" ended")
    out = subprocess.run(
        [
            "mpiexec.mpich",
            "-n",
            "1",
            str(kernels.kernel_path("ct-io-fwd", "mpich")),
            "--dir",
            "sub",
            "--sizes",
            "8",
            "--reps",
            "1",
            "--mode",
            "collective",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0 and '"verification":"passed"' in out.stdout.replace(" ", ""), out
    assert "preloaded finalize" in out.stderr
    deadline = time.monotonic() + 10
    while log_of(service).count(" ended") == ended and time.monotonic() < deadline:
        time.sleep(0.05)
    assert log_of(service).count("unexpected eof") == before  # the BYE went first


def test_a_client_killed_mid_write_leaves_no_file_and_the_server_serves(
    server, ca, tmp_path
) -> None:
    port, export, service = server
    (export / "sub" / "victim.nc").write_bytes(b"an older complete file")
    s = start_write(ca, port, "sub/victim.nc", 1 << 18)
    s.sendall(frame(15, b"\0" * 4096))  # 4 KiB of the 1 MiB promised, then it dies
    s.close()
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"
    assert (export / "sub" / "victim.nc").read_bytes() == b"an older complete file"
    assert not list((export / "sub").glob(".victim.nc.ct-partial*"))
    assert "aborted" in log_of(service, until="aborted")


def test_malformed_frames_and_fuzz_leave_the_server_serving(server, ca, tmp_path) -> None:
    port, _, service = server
    rng = random.Random(12)
    bad = [
        frame(1, b"", magic=b"XXXX"),  # not our protocol
        frame(1, struct.pack("<IIQ", 0, 1, 7), version=9),  # another version
        b"CTIO" + struct.pack("<HHI", 1, 2, 1 << 30),  # oversized
        frame(77),  # unknown op
        frame(1, b"\1\2"),  # truncated HELLO payload
        b"CTIO\1",  # truncated header, then the connection closes
    ]
    bad += [frame(rng.randrange(0, 120), rng.randbytes(rng.randrange(0, 64))) for _ in range(10)]
    bad += [rng.randbytes(rng.randrange(1, 40)) for _ in range(6)]
    for i, data in enumerate(bad):
        try:
            s = tls(ca, "alice", port)
        except OSError as exc:
            raise AssertionError(f"frame {i}: {exc}\n{log_of(service)}") from exc
        s.sendall(data)
        s.close()
    # inside a session: a frame out of place ends that session only
    s = start_write(ca, port, "sub/fuzz.nc", 64)
    s.sendall(frame(2, rng.randbytes(30)))  # a CREATE where DATA was due
    with pytest.raises((ConnectionError, ssl.SSLError, OSError)):
        reply(s)
        reply(s)
    assert "refused" in log_of(service, until="refused")
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


def finish_write(s: ssl.SSLSocket, n: int) -> int:
    """Sends the n ints of start_write's PUT, closes the file and says BYE: the close's status."""
    s.sendall(frame(15, struct.pack(f"<{n}i", *range(n))))
    assert reply(s) == 0
    s.sendall(frame(16, struct.pack("<i", 0)))
    status = reply(s)
    s.sendall(frame(17))
    s.close()
    return status


def send_data(s: ssl.SSLSocket, data: bytes) -> None:
    """A put's data as DATA frames of at most 1 MiB (the protocol's chunk)."""
    for at in range(0, len(data), 1 << 20):
        s.sendall(frame(15, data[at : at + (1 << 20)]))


def get_data(s: ssl.SSLSocket, nbytes: int) -> tuple[int, bytes]:
    """A get's status and, when it succeeded, its ``nbytes`` of DATA frames."""
    status = reply(s)
    data = bytearray()
    while status == 0 and len(data) < nbytes:
        head = recv_exactly(s, 12)
        assert head[:4] == b"CTIO" and struct.unpack("<H", head[6:8])[0] == 15
        data += recv_exactly(s, struct.unpack("<I", head[8:12])[0])
    return status, bytes(data)


def peak_resident_bytes(export: Path) -> int:
    """VmHWM of the one ct-io-server process serving ``export``."""
    (status,) = [
        (entry / "status").read_text()
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit()
        and (argv := (entry / "cmdline").read_bytes().split(b"\0"))[0].endswith(b"ct-io-server")
        and str(export).encode() in argv
    ]
    return int(re.search(r"VmHWM:\s+(\d+) kB", status)[1]) * 1024


def test_a_server_rank_holds_one_round_per_client_within_its_memory_budget(ca, tmp_path) -> None:
    """Review F15: a rank allocated every client's whole request before any data moved (up to
    --max-request, 2 GiB, per client, 64 clients), even when --round streams it, so one
    session could exhaust the host. Now it holds one round per client, all within
    --max-session-memory: a 64 MiB put and get pass through a 1 MiB budget in 256 KiB rounds
    without the server growing by the block, and a request whose single row exceeds the
    budget is NC_ENOMEM (a put's data read and dropped), the session and the server going on."""
    n = 16 << 20  # ints: a 64 MiB block
    argv = remote.server_argv(
        1, tmp_path, ca, idle_timeout=10, round_bytes=256 << 10, max_session_memory=1 << 20
    )
    with serving(argv) as service:
        port = int(service.ready_match.group(1))
        s = start_write(ca, port, "big.nc", n)
        before = peak_resident_bytes(tmp_path)
        block = np.arange(n, dtype="<i4").tobytes()
        send_data(s, block)
        assert reply(s) == 0
        s.sendall(frame(14, struct.pack("<iiBIqq", 0, 0, 1, 1, 0, n)))
        assert get_data(s, len(block)) == (0, block)
        grown = peak_resident_bytes(tmp_path) - before
        assert grown < 16 << 20, f"the server grew by {grown} bytes for a 64 MiB block"
        # a 2 x 512Ki variable: one row is 2 MiB, above the budget whatever the round
        for request in (
            frame(2, struct.pack("<ii", 1, 0) + text("rows.nc")),
            frame(5, struct.pack("<i", 1) + text("y") + struct.pack("<q", 2)),
            frame(5, struct.pack("<i", 1) + text("x") + struct.pack("<q", 1 << 19)),
            frame(6, struct.pack("<i", 1) + text("v") + struct.pack("<iIii", NC_INT, 2, 0, 1)),
            frame(7, struct.pack("<i", 1)),
        ):
            s.sendall(request)
            assert reply(s) == 0
        rows = struct.pack("<iiBIqqqq", 1, 0, 1, 2, 0, 2, 0, 1 << 19)
        s.sendall(frame(13, rows))
        send_data(s, bytes(4 << 20))
        assert reply(s) == NC_ENOMEM
        s.sendall(frame(14, rows))
        assert get_data(s, 4 << 20) == (NC_ENOMEM, b"")
        for handle in (1, 0):
            s.sendall(frame(16, struct.pack("<i", handle)))
            assert reply(s) == 0
        s.sendall(frame(17))
        s.close()
        assert "above --max-session-memory 1048576" in log_of(service, until="above --max")
        assert alice_answered_in(ca, port) < HANDSHAKE_S  # the next session is served
    with netCDF4.Dataset(tmp_path / "big.nc") as ds:
        assert np.array_equal(ds["data"][:], np.arange(n, dtype="<i4"))


def header_file(path: Path, reply_bytes: int) -> None:
    """A netCDF file whose OPEN reply holds exactly ``reply_bytes`` after its status: no
    dimension and n scalar variables (u32 ndims, u32 nvars, then per variable a u32 length,
    a name of 255 or 256 characters and an i32 ndims)."""
    total = reply_bytes - 8
    n = -(-total // (8 + 256))
    base, extra = divmod(total - 8 * n, n)
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        for i in range(n):
            ds.createVariable(f"v{i:04d}".ljust(base + (i < extra), "x"), "i4")


def open_request(path: str, handle: int = 0) -> bytes:
    return frame(3, struct.pack("<ii", handle, 0) + text(path))


@pytest.mark.parametrize("size", [65532, 65533, 70000])
def test_an_open_reply_is_bounded_by_construction(server, ca, tmp_path, size) -> None:
    """Issue 20 item 1: the OPEN reply carries the header; one of 65532 bytes fills the 64 KiB
    reply with the status; 65533 wrote past the server's stack buffer, and a larger one was
    answered NC_NOERR without its header. Now both are NC_ENOMEM, and the file is closed."""
    port, export, service = server
    header_file(export / "sub" / f"h{size}.nc", size)
    s = tls(ca, "alice", port)
    assert hello(s) == 0
    s.sendall(open_request(f"sub/h{size}.nc"))
    status, rest = reply_frame(s)
    if size <= 65532:
        assert status == 0 and len(rest) == size
        assert struct.unpack("<II", rest[:8]) == (0, -(-(size - 8) // 264))
    else:
        assert (status, rest) == (NC_ENOMEM, b"")
        assert f"open sub/h{size}.nc: its header exceeds one reply" in log_of(
            service, until=f"h{size}.nc: its header"
        )
        s.sendall(open_request(f"sub/h{size}.nc"))  # handle 0 was given back: not NC_EBADID
        assert reply_frame(s) == (NC_ENOMEM, b"")
    s.sendall(frame(17))
    s.close()
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


def test_a_grid_mapfile_area_leading_out_of_the_export_is_refused(server, ca) -> None:
    """Issue 20 item 2: bob's area "escape" is a symlink to a directory outside the export;
    the old server took the area's realpath as the root and let him write there."""
    port, export, service = server
    outside = (export / "escape").resolve()
    s = tls(ca, "bob", port)
    assert hello(s) == NC_EACCESS
    s.close()
    bob = security.dn_of("bob")
    assert f"refused {bob}: grid-mapfile area escape passes through a symlink" in log_of(
        service, until="area escape passes"
    )
    assert sorted(p.name for p in outside.iterdir()) == ["precious"]


def test_a_link_planted_at_the_temporary_name_is_not_followed(server, ca) -> None:
    """Issue 20 item 3: the temporary's name came from the client's token and was created
    through whatever stood there; a link planted under it let a client overwrite any file the
    server can write. Now the name is the server's own random one, created exclusively."""
    port, export, _ = server
    precious = (export / "escape").resolve() / "precious"
    token = 0x0123456789ABCDEF
    plant = export / "sub" / f".planted.nc.ct-partial-{token:016x}"
    plant.symlink_to(precious)
    try:
        assert finish_write(start_write(ca, port, "sub/planted.nc", 8, token), 8) == 0
        assert precious.read_text() == "not the server's to touch"
        written = export / "sub" / "planted.nc"
        assert written.is_file() and not written.is_symlink()
        with netCDF4.Dataset(written) as ds:
            assert list(ds["data"][:]) == list(range(8))
        assert plant.is_symlink() and not list(
            (export / "sub").glob(".planted.nc.ct-partial-*[!f]")
        )
    finally:
        plant.unlink(missing_ok=True)


def test_a_file_named_through_a_symlink_is_refused_for_reading_and_writing(server, ca) -> None:
    port, export, service = server
    (export / "sub" / "link.nc").symlink_to((export / "escape").resolve() / "precious")
    s = tls(ca, "alice", port)
    assert hello(s) == 0
    s.sendall(open_request("sub/link.nc"))
    assert reply(s) == NC_ENOENT
    s.sendall(frame(2, struct.pack("<ii", 0, 0) + text("sub/link.nc")))
    assert reply(s) == NC_EACCESS
    s.sendall(frame(17))
    s.close()
    assert "path sub/link.nc is a symlink" in log_of(service, until="sub/link.nc is a symlink")


def gridmap_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('"CN=x,O=y" .', "expected"),
        ('"CN=x,O=y" . wr', "right 'wr'"),
        ('"CN=x,O=y" ../up rw', "area '../up'"),
        ("CN=x . rw", "expected"),
    ],
)
def test_the_grid_mapfile_is_read_strictly(tmp_path, line, why) -> None:
    """Issue 20 item 4: a line without a valid right granted rw ("m[3] or 'rw'")."""
    from clustertune.errors import UserError

    path = gridmap_lines(
        tmp_path / "grid-mapfile", "# users", f'"{security.dn_of("a")}" . ro', line
    )
    with pytest.raises(UserError, match=rf"{path}:3: .*{re.escape(why)}"):
        security.gridmap_entries(path)
    good = gridmap_lines(tmp_path / "good", "", f'"{security.dn_of("a")}" sub ro  ')
    assert security.gridmap_entries(good) == {security.dn_of("a"): ("sub", "ro")}


# (the file's bytes, the number of the line both parsers refuse or None): review F14
GRIDMAP_CASES = [
    (b'"CN=a,O=b" . rw\r\n"CN=c,O=b" sub ro\r\n', None),  # CRLF line ends
    (b'\r\n\t# note\r\n"CN=a" . rw\n', None),
    (b'"CN=a"sub rw\n', 1),  # no blank after the subject
    (b'"CN=a\\"b,O=c" . rw\n', None),  # RFC 2253's escaped quote inside a value
    (b'"CN=a\\" . rw\n', 1),  # the closing quote escaped: none left
    ('"CN=a"\u00a0. rw\n'.encode(), 1),  # blanks are spaces and tabs only
    ('"CN=a" a\u00a0b rw\n'.encode(), None),
    (b'"CN=a" . rw\n"CN=b" . ro\n"CN=a" sub ro\n', 3),  # a second line for a subject
    (b'"CN=' + b"x" * 4100 + b'" . rw\n', 1),
    (b'"CN=a" . rw extra\n', 1),
    (b'"CN=a" sub/../.. rw\n', 1),
    (b'"CN=a" . wr\n', 1),
    (b"\x0b\n", 1),
    (b'"" . rw\n', 1),
    (b'"CN=\xff" . ro', None),  # not UTF-8, no final newline
    (b'"CN=a" . rw\n"CN=b" \x00 rw\n', 2),  # a NUL byte: no C string reads past it
    (b'"CN=a\x00" . rw\n', 1),
]


@pytest.mark.parametrize(("content", "bad"), GRIDMAP_CASES)
def test_the_tools_and_the_server_read_the_grid_mapfile_alike(tmp_path, content, bad) -> None:
    """Review F14: security.py (io ca grant, --remote's checks) and ct-io-server parsed the
    grid-mapfile differently (CRLF, blanks after the subject, escaped quotes, duplicates),
    so a file the tools passed could make the server refuse everyone. The same bytes to both."""
    from clustertune.errors import UserError

    path = tmp_path / "gm"
    path.write_bytes(content)
    server = kernels.kernel_path("ct-io-server", "openmpi")
    argv = [str(server), "--export", str(tmp_path), "--gridmap", str(path), "--check-only"]
    argv += ["--cert", "-", "--key", "-", "--ca", "-"]  # not read by --check-only
    out = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=30)
    if bad is None:
        assert (out.returncode, out.stderr) == (0, ""), out
        assert len(security.gridmap_entries(path)) == content.count(b'" ')
    else:
        assert out.returncode == 2, out
        assert out.stderr.startswith(f"ct-io-server: --gridmap {path}:{bad}: "), out.stderr
        with pytest.raises(UserError, match=rf"^{re.escape(str(path))}:{bad}: "):
            security.gridmap_entries(path)


def test_an_escaped_quote_stays_in_the_subject_as_written(tmp_path) -> None:
    subject = 'CN=a\\"b,O=c'  # RFC 2253 form of a CN holding a quote
    assert security.check_dn(subject) == subject
    path = gridmap_lines(tmp_path / "gm", f'"{subject}" . rw')
    assert security.gridmap_entries(path) == {subject: (".", "rw")}


def test_the_server_refuses_to_start_on_a_bad_grid_mapfile(ca, tmp_path) -> None:
    bad = gridmap_lines(tmp_path / "gm", f'"{security.dn_of("alice")}" .')
    creds = security.credentials(ca, remote.SERVER_NAME)
    out = subprocess.run(
        [
            str(kernels.kernel_path("ct-io-server", "openmpi")),
            "--export",
            str(tmp_path),
            "--cert",
            str(creds.cert),
            "--key",
            str(creds.key),
            "--ca",
            str(creds.ca),
            "--gridmap",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert out.returncode == 2, out
    assert out.stderr.strip() == (
        f"ct-io-server: --gridmap {bad}:1: subject "
        f"{security.dn_of('alice')} without a right (rw or ro)"
    )


def with_option(argv: list[str], option: str, value: str) -> list[str]:
    argv = list(argv)
    argv[argv.index(option) + 1] = value
    return argv


def own_server(ca: Path, export: Path, **options: str):
    """A ct-io-server of one rank for one test, with some options replaced."""
    argv = remote.server_argv(1, export, ca, idle_timeout=5, handshake_timeout=HANDSHAKE_S)
    for option, value in options.items():
        argv = with_option(argv, "--" + option.replace("_", "-"), value)
    return serving(argv)


def test_a_grid_mapfile_spoilt_while_serving_refuses_everyone_until_fixed(ca, tmp_path) -> None:
    gm = gridmap_lines(tmp_path / "gm", f'"{security.dn_of("alice")}" . rw')
    with own_server(ca, tmp_path, gridmap=str(gm)) as service:
        port = int(service.ready_match.group(1))
        s = tls(ca, "alice", port)
        assert hello(s) == 0
        s.sendall(frame(17))
        s.close()
        gridmap_lines(gm, f'"{security.dn_of("alice")}" .', f'"{security.dn_of("bob")}" . rw')
        s = tls(ca, "alice", port)
        assert hello(s) == NC_EACCESS
        s.close()
        assert f"grid-mapfile {gm}:1: subject {security.dn_of('alice')} without a right" in log_of(
            service, until="without a right"
        )
        gridmap_lines(gm, f'"{security.dn_of("alice")}" . ro')
        s = tls(ca, "alice", port)
        assert hello(s) == 0
        s.sendall(frame(2, struct.pack("<ii", 0, 0) + text("ro.nc")))
        assert reply(s) == NC_EACCESS  # read-only now
        s.sendall(frame(17))
        s.close()
    assert not list(tmp_path.glob("*.nc")) and not list(tmp_path.glob(".*ct-partial*"))


def closed(sock: socket.socket) -> bool:
    """Whether the peer has closed the connection (without waiting)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except (BlockingIOError, ssl.SSLWantReadError):
        return False
    except OSError:
        return True
    finally:
        sock.setblocking(True)


def test_silent_and_trickling_peers_delay_no_one(server, ca, tmp_path) -> None:
    """Issue 20 item 6: a peer that connects and says nothing, or finishes TLS and sends no
    HELLO, or trickles a byte now and then, held rank 0 (one connection at a time, 10 s per
    read, then --idle-timeout). Now every handshake runs at once and each has a hard deadline:
    alice's HELLO is answered at once, and each of them is dropped at its deadline."""
    port, _, service = server
    before = log_of(service).count(f"no TLS handshake and HELLO within {HANDSHAKE_S:g} s")
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(3)]
    quiet = tls(ca, "mallory", port)  # TLS done, no HELLO
    trickle = socket.create_connection(("127.0.0.1", port))
    trickle.sendall(b"\x16\x03\x01\x02\x00")  # a record header promising 512 bytes
    started = time.monotonic()
    answered = alice_answered_in(ca, port)
    assert answered < HANDSHAKE_S, answered
    while not closed(trickle) and time.monotonic() - started < 4 * HANDSHAKE_S:
        try:
            trickle.sendall(b"\1")  # one byte each 0.2 s: never a whole record
        except OSError:
            break
        time.sleep(0.2)
    dropped = time.monotonic() - started
    assert dropped < HANDSHAKE_S + 1.5, dropped
    time.sleep(0.5)
    assert all(closed(c) for c in silent) and closed(quiet)
    log = log_of(service, until="no TLS handshake")
    assert log.count(f"no TLS handshake and HELLO within {HANDSHAKE_S:g} s") - before >= 5
    for c in [*silent, quiet, trickle]:
        c.close()
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


def test_more_silent_connections_than_slots_lock_no_one_out(server, ca, tmp_path) -> None:
    """Review F7: 64 silent connections took every handshake slot and the server stopped
    accepting, so a peer without a certificate could hold the service by reconnecting. Now
    the oldest is dropped for the newest."""
    port, _, service = server
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(72)]
    time.sleep(0.3)  # all accepted before alice comes
    answered = alice_answered_in(ca, port)
    assert answered < HANDSHAKE_S / 2, answered  # not behind the silent ones' deadline
    assert log_of(service, until="dropped for a newer").count("dropped for a newer connection") >= 8
    for c in silent:
        c.close()
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


def test_sessions_that_come_while_one_forms_wait_their_turn(ca, tmp_path) -> None:
    """Review F16: while a session waited for its other client ranks, the first HELLO of
    another session was refused ("does not belong to the session") instead of queued; and a
    connection accepted then, whose HELLO came while the session was served, was dropped
    afterwards for the server's own delay ("no TLS handshake and HELLO within 2 s"). Now the
    HELLO waits for its turn, and a connection's clock stops while a session is served."""
    with own_server(ca, tmp_path, idle_timeout="10") as service:
        port = int(service.ready_match.group(1))
        token = random.getrandbits(64)
        first = tls(ca, "alice", port)
        first.sendall(frame(1, struct.pack("<IIQ", 0, 2, token)))
        assert reply_frame(first)[0] == 0  # the session forms: client rank 1 still to come
        queued = tls(ca, "reader", port)
        queued.sendall(frame(1, struct.pack("<IIQ", 0, 1, random.getrandbits(64))))
        late = tls(ca, "reader", port)  # its HELLO comes once the session is served
        time.sleep(0.3)
        second = tls(ca, "alice", port)
        second.sendall(frame(1, struct.pack("<IIQ", 1, 2, token)))
        assert reply(second) == 0
        late.sendall(frame(1, struct.pack("<IIQ", 0, 1, random.getrandbits(64))))
        time.sleep(HANDSHAKE_S + 1)  # the session lasts longer than a handshake may
        for c in (first, second):
            c.sendall(frame(17))
            c.close()
        for c in (queued, late):  # in the order they came, each answered in its turn
            c.settimeout(10)
            assert reply(c) == 0
            c.sendall(frame(17))
            c.close()
        log = log_of(service, until="session 3 ended")
        assert "session 3 ended" in log
        assert "does not belong" not in log and "no TLS handshake" not in log, log


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "clustertune.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_revoked_and_expired_certificates_are_refused_with_their_reason(
    server, ca, tmp_path
) -> None:
    """Issue 20 item 7: 'io ca revoke' writes the CA's CRL, which the running server re-reads;
    a revoked and an expired certificate are refused at the handshake, the log says why."""
    port, _, service = server
    for name, days in (("carol", security.DAYS), ("dave", -1)):
        security.issue(ca, name, days=days)
        security.grant(ca, security.dn_of(name), ".", "rw")
    s = tls(ca, "carol", port)
    assert hello(s) == 0
    s.sendall(frame(17))
    s.close()
    out = cli("io", "ca", "revoke", "carol", "--ca-dir", str(ca))
    assert out.returncode == 0 and "carol revoked" in out.stdout, out
    for name, why in (("carol", "certificate revoked"), ("dave", "certificate has expired")):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            s = tls(ca, name, port)
            hello(s)
        line = f"refused {security.dn_of(name)}: TLS handshake: certificate refused: {why}"
        assert line in log_of(service, until=line)
    assert "re-read" in log_of(service)
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


def test_revoking_a_name_revokes_its_earlier_certificates_too(server, ca, tmp_path) -> None:
    """Review F25: a re-issued name's earlier certificate (a key thought compromised) stayed
    valid: revoke took only the NAME.pem on disk."""
    port, _, service = server
    security.issue(ca, "frank")
    for suffix in ("pem", "key"):
        shutil.copy(ca / f"frank.{suffix}", tmp_path / f"frank.{suffix}")  # the first one
    security.issue(ca, "frank")
    security.grant(ca, security.dn_of("frank"), ".", "rw")
    security.revoke(ca, "frank")
    for where in (tmp_path, None):
        with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
            s = tls(ca, "frank", port, where)
            hello(s)
    line = f"refused {security.dn_of('frank')}: TLS handshake: certificate refused: certificate revoked"
    deadline = time.monotonic() + 10
    while log_of(service).count(line) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)  # the log is drained on a thread
    assert log_of(service).count(line) >= 2


def run_client(ca: Path, port: int, **env: str) -> subprocess.CompletedProcess:
    full = (
        os.environ
        | remote.client_env(security.credentials(ca, "alice"), f"127.0.0.1:{port}", True, "job")
        | env
    )
    return subprocess.run(
        [
            "mpiexec.mpich",
            "-n",
            "1",
            str(kernels.kernel_path("ct-io-fwd", "mpich")),
            "--dir",
            ".",
            "--sizes",
            "8",
            "--reps",
            "1",
            "--mode",
            "collective",
        ],
        env=full,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_client_refuses_a_server_that_is_not_the_one_it_dialled(ca, tmp_path) -> None:
    """Issue 20 item 5: any certificate of the CA served as the server's. Now the client wants
    the pinned server subject, or (unpinned) the address it dialled in the subjectAltName."""
    other = security.issue(ca, "impostor", server=True, hosts=("127.0.0.1",))
    elsewhere = security.issue(ca, "elsewhere", server=True, hosts=("192.0.2.7", "far.example"))
    for creds, pinned, why in (
        (
            other,
            None,
            "the server's certificate is CN=impostor,OU=server,O=clustertune,C=JP, "
            "not the expected CN=server,OU=server,O=clustertune,C=JP",
        ),
        (elsewhere, "", "certificate refused: IP address mismatch"),
    ):
        with own_server(ca, tmp_path, cert=str(creds.cert), key=str(creds.key)) as service:
            port = int(service.ready_match.group(1))
            env = {} if pinned is None else {"CT_NCFWD_SERVER_SUBJECT": pinned}
            out = run_client(ca, port, **env)
            assert out.returncode != 0 and why in out.stderr, out.stderr
            assert "session of" not in log_of(service)
    # the same client, unpinned, takes a server whose certificate names 127.0.0.1
    with own_server(ca, tmp_path, cert=str(other.cert), key=str(other.key)) as service:
        out = run_client(ca, int(service.ready_match.group(1)), CT_NCFWD_SERVER_SUBJECT="")
        assert out.returncode == 0, out.stderr


def two_client_session(ca: Path, port: int) -> list[ssl.SSLSocket]:
    """Client ranks 0 and 1 of one session on the 2-rank server (rank r on server rank r)."""
    token = random.getrandbits(64)
    first = tls(ca, "alice", port)
    first.sendall(frame(1, struct.pack("<IIQ", 0, 2, token)))
    status, rest = reply_frame(first)
    assert status == 0 and struct.unpack("<I", rest[:4])[0] == 2
    second = tls(ca, "alice", struct.unpack("<H", rest[6:8])[0])
    second.sendall(frame(1, struct.pack("<IIQ", 1, 2, token)))
    assert reply(second) == 0
    return [first, second]


def each(clients: list[ssl.SSLSocket], *requests: bytes) -> list[int]:
    """Each client sends its request (one per client, or one for all); their replies."""
    for c, r in zip(
        clients, requests * len(clients) if len(requests) == 1 else requests, strict=False
    ):
        c.sendall(r)
    return [reply(c) for c in clients]


def test_server_ranks_agree_when_client_ranks_disagree(server, ca, tmp_path) -> None:
    """Review F1/F2: the checks of a put (its ndims against the variable's) and of a metadata
    request (every client asked the same) were per server rank: one rank skipped the
    collective begin_indep_data and the ranks hung or answered differently, and a CLOSE was
    performed (its rename) although a client had asked for something else."""
    port, export, service = server
    clients = two_client_session(ca, port)
    for request in (
        frame(2, struct.pack("<ii", 0, 0) + text("sub/agree.nc")),
        frame(5, struct.pack("<i", 0) + text("z") + struct.pack("<q", 2)),
        frame(5, struct.pack("<i", 0) + text("x") + struct.pack("<q", 4)),
        frame(6, struct.pack("<i", 0) + text("data") + struct.pack("<iIii", NC_INT, 2, 0, 1)),
        frame(7, struct.pack("<i", 0)),
    ):
        assert each(clients, request) == [0, 0]
    good = frame(13, struct.pack("<iiBIqqqq", 0, 0, 0, 2, 0, 1, 0, 4)) + frame(15, bytes(16))
    bad = frame(13, struct.pack("<iiBIqq", 0, 0, 0, 1, 1, 4)) + frame(15, bytes(16))
    assert each(clients, good, bad) == [NC_EINVAL, NC_EINVAL]  # independent: begin_indep
    close = frame(16, struct.pack("<i", 0))
    assert each(clients, close, frame(16, struct.pack("<i", 1))) == [NC_EINVAL, NC_EINVAL]
    assert not (export / "sub" / "agree.nc").exists()  # the CLOSE was performed for none
    for c in clients:
        c.sendall(frame(17))
        c.close()
    assert "client ranks sent different CLOSE requests" in log_of(service, until="different CLOSE")
    assert measure(port, ca, db=tmp_path / "r.db", sizes=[16], directory="sub")["status"] == "ok"


@pytest.mark.root
def test_across_two_sites_mpich_client_openmpi_server(ca, make_vcluster, store) -> None:
    cluster = make_vcluster(2, 1_000_000_000, sites=2, wan_bps=1_000_000_000)
    site = cluster.sites[1].name
    record = netcdf.measure(
        cluster,
        store,
        np=2,
        mpi="mpich",
        sizes=[16, 32],
        mode="both",
        ops=["write", "read"],
        fmt="cdf1",
        reps=2,
        remote=site,
        ca_dir=ca,
        identity="alice",
    )
    assert record["status"] == "ok", record["error"]
    assert all(r["valid"] and r["remote"] == site for r in netcdf.results(record))
    files = record["figures"]["files"]
    assert len(files) == 4 and all(
        v == {"ncvalidator": True, "ncdump": True, "netcdf4": True} for v in files.values()
    )
    server_host = [h.name for h in cluster.hosts if h.site == site][0]
    assert record["meta"]["hosts"] == [h.name for h in cluster.hosts if h.name != server_host]
    assert record["figures"]["wan_bps"] == cluster.wan_bps
    assert set(record["figures"]["link_share"]) == {"16", "32"}
    html = section.render([record])
    assert "Remote collective I/O" in html and "mpich" in html and "of 1gbit" in html


HOLD_AN_AREA = (
    "import time; from clustertune.levels.io import remote; "
    "print(remote.export_dir(), flush=True); time.sleep(600)"
)


def test_an_export_area_left_by_a_killed_run_is_removed_at_the_next_start() -> None:
    """Two runs' areas: the SIGKILLed one's goes at the next export_dir(), never a live one's."""
    runs = [
        subprocess.Popen([sys.executable, "-c", HOLD_AN_AREA], stdout=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    try:
        killed, live = (Path(p.stdout.readline().strip()) for p in runs)
        runs[0].kill()
        runs[0].wait()
        assert killed.is_dir() and live.is_dir()
        mine = remote.export_dir()
        assert not killed.exists() and live.is_dir() and mine.is_dir()
        runs[1].kill()
        runs[1].wait()
        again = remote.export_dir()
        assert not live.exists() and mine.is_dir() and again.is_dir()  # its own areas stay
        shutil.rmtree(mine)
        shutil.rmtree(again)
    finally:
        for p in runs:
            p.kill()
            p.wait()


def test_link_share_and_forwarding_label() -> None:
    samples = [{"size": 8, "op": "write", "mode": "collective", "bytes": 1e6,
                "open_to_close_s": {"min": 0.01}},
               {"size": 8, "op": "write", "mode": "independent", "bytes": 1e6,
                "open_to_close_s": {"min": 0.02}},
               {"size": 8, "op": "read", "mode": "collective", "bytes": 1e6,
                "open_to_close_s": {"min": 0.016}}]  # fmt: skip
    assert remote.link_shares(samples, 10**9) == {"8": {"write": 0.8, "read": 0.5}}
    assert remote.link_shares(samples, None) == {}
    label = section.forwarding(
        {"params": {"servers": 1, "batch": False, "session": "file", "server_round": 0}}
    )
    assert label == "1 server rank(s), per-call (paper), session per file, store-and-forward"
    assert "rounds of 4 MiB" in section.forwarding({"params": {"server_round": None}})
