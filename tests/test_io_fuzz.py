"""ct-io-server under AddressSanitizer + UndefinedBehaviorSanitizer (build/sanitize, made by
'make kernels'): the in-process fuzzer's short run (bench/io_fuzz.py runs the long one), and
the server attacked from outside over TLS by a holder of a valid CA certificate with no
grid-mapfile line, then with a read-only line (issue 20)."""

from __future__ import annotations

import os
import random
import socket
import struct
import sys
import time
from pathlib import Path

import netCDF4
import pytest
from test_io_remote import (
    HANDSHAKE_S,
    NC_EACCESS,
    alice_answered_in,
    closed,
    frame,
    hello,
    log_of,
    measure,
    open_request,
    reply,
    tls,
)

from clustertune import kernels, security
from clustertune.cluster import local_cluster
from clustertune.launch.launchers import launcher_for
from clustertune.levels.io import remote

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
import io_fuzz  # noqa: E402  (bench/io_fuzz.py: the fuzzer's runner, shared with the bench)

SANITIZED_SERVER = ROOT / "build/sanitize/bin/ct-io-server"
SANITIZER_REPORT = io_fuzz.SANITIZER_REPORT


def test_the_fuzzer_finds_nothing_in_a_short_run() -> None:
    """8000 frames (about 700 sessions; at most 40 s under load) of generated and mutated
    sessions, a new seed each time, printed: no sanitizer report, no broken invariant; and the
    frames reached deep: malformed ones refused, written files aborted, so the run is not all
    rejected at the first header. bench/io_fuzz.py is the long run (docs/io.md)."""
    seed = random.randrange(1 << 32)
    r = io_fuzz.run(frames=8000, seed=seed, seconds=40)
    assert r["returncode"] == 0 and not r["findings"] and not r["reports"], (
        f"seed {seed}: {r['findings'] + r['reports']}\n{r['stderr'][-3000:]}"
    )
    assert r["frames"] >= 5000 and r["sessions"] >= 500, r["stdout"][-500:]
    assert r["stderr"].count("malformed") >= 50 and "aborted" in r["stderr"]
    assert b"__asan_init" in io_fuzz.FUZZER.read_bytes()  # the build is instrumented


@pytest.fixture(scope="module")
def attacked(tmp_path_factory):
    """The ASan + UBSan build of ct-io-server (2 ranks), its export and a directory outside
    it: yields (port, export, outside, service)."""
    assert SANITIZED_SERVER.is_file(), "build/sanitize missing: run 'make kernels'"
    kernels.kernel_path("ct-io-fwd", "mpich")
    ca = tmp_path_factory.mktemp("ca")
    remote.prepare_ca(ca, "alice")
    for name, right in (("mallory", None), ("reader", "ro")):
        security.issue(ca, name)
        if right:
            security.grant(ca, security.dn_of(name), ".", right)
    export, outside = tmp_path_factory.mktemp("export"), tmp_path_factory.mktemp("outside")
    (export / "sub").mkdir()
    (outside / "precious").write_text("not the server's to touch")
    (export / "escape").symlink_to(outside)
    (export / "sub" / "link.nc").symlink_to(outside / "precious")
    with netCDF4.Dataset(export / "sub" / "public.nc", "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 4)
        ds.createVariable("data", "i4", ("x",))[:] = [1, 2, 3, 4]
    env = remote.server_env() | {"ASAN_OPTIONS": "detect_leaks=0"}
    argv = remote.server_argv(2, export, ca, idle_timeout=5, env=env, handshake_timeout=HANDSHAKE_S)
    argv[argv.index(str(kernels.kernel_path("ct-io-server", "openmpi")))] = str(SANITIZED_SERVER)
    service = launcher_for(local_cluster()).service(
        local_cluster().hosts[0].name,
        argv,
        ready=remote.READY,
        env=env,
        lifetime=600,
        stop_grace=0.5,
    )
    with service as s:
        yield int(s.ready_match.group(1)), export, outside, ca, s


def state_of(tree: Path, atime: bool) -> dict[str, tuple]:
    """Every entry under tree: its kind, size, mtime and (with atime) its atime: a read
    moves it, as the outside file's atime is set before its mtime (relatime)."""
    return {
        str(p.relative_to(tree)): (p.is_symlink(), st.st_size, st.st_mtime_ns)
        + ((st.st_atime_ns,) if atime else ())
        for p in sorted(tree.rglob("*"))
        for st in [p.lstat()]
    }


def garbage(rng: random.Random) -> bytes:
    ops = [rng.randrange(0, 120) for _ in range(rng.randrange(1, 6))]
    return b"".join(frame(op, rng.randbytes(rng.randrange(0, 80))) for op in ops)


def test_an_attacker_with_a_ca_certificate_gets_nothing_and_delays_no_one(attacked) -> None:
    port, export, outside, ca, service = attacked
    precious = outside / "precious"
    os.utime(precious, ns=(precious.stat().st_mtime_ns - 10**9, precious.stat().st_mtime_ns))
    inside_before, outside_before = state_of(export, False), state_of(outside, True)
    rng = random.Random(20)
    # no grid-mapfile line: HELLOs of every shape, then garbage; silent connections held
    silent = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    for _ in range(25):
        s = tls(ca, "mallory", port)
        token, size = rng.getrandbits(64), rng.choice([1, 2, 64, 2**32 - 1])
        s.sendall(frame(1, struct.pack("<IIQ", 0, size, token)) + garbage(rng))
        assert reply(s) == NC_EACCESS
        s.close()
    answered = alice_answered_in(ca, port)
    assert answered < HANDSHAKE_S, answered
    # a read-only line: every write and every path out refused, a read inside allowed
    s = tls(ca, "reader", port)
    assert hello(s) == 0
    s.sendall(frame(2, struct.pack("<ii", 0, 0) + struct.pack("<I", 4) + b"x.nc"))
    assert reply(s) == NC_EACCESS
    for path in (
        "../outside/precious",
        str(precious),
        "escape/precious",
        "sub/link.nc",
        "/etc/passwd",
        "sub/../../outside/precious",
        f"{export}/escape/precious",
    ):
        s.sendall(open_request(path))
        assert reply(s) in (NC_EACCESS, -220), path  # access refused, or no such file
    s.sendall(open_request("sub/public.nc"))
    assert reply(s) == 0
    s.sendall(garbage(rng))  # then the session is ended by the server
    s.close()
    time.sleep(HANDSHAKE_S + 0.5)
    assert all(closed(c) for c in silent)
    log = log_of(service, until="no TLS handshake")
    assert log.count(f"refused {security.dn_of('mallory')}: subject not in the grid-mapfile") == 25
    assert "session of 1 client ranks for " + security.dn_of("mallory") not in log
    assert state_of(outside, True) == outside_before  # nothing created, changed or read
    assert state_of(export, False) == inside_before  # nothing created or changed
    assert not SANITIZER_REPORT.search(log), log
    assert service.running
    record = measure(port, ca, db=export.parent / "r.db", sizes=[16], directory="sub")
    assert record["status"] == "ok", record["error"]


def test_a_file_left_open_at_bye_is_aborted(attacked) -> None:
    """Found by the fuzzer: a session that said BYE with a file still being written kept its
    PnetCDF handle, descriptors and temporary for the life of the server."""
    port, export, _, ca, service = attacked
    s = tls(ca, "alice", port)
    assert hello(s) == 0
    s.sendall(frame(2, struct.pack("<ii", 0, 0) + struct.pack("<I", 11) + b"sub/left.nc"))
    assert reply(s) == 0, log_of(service)
    s.sendall(frame(17))
    s.close()
    assert "aborted sub/left.nc" in log_of(service, until="aborted sub/left.nc")
    assert not list((export / "sub").glob(".left.nc.ct-partial-*"))
    assert not (export / "sub" / "left.nc").exists()
    assert not SANITIZER_REPORT.search(log_of(service))


def test_a_put_naming_fewer_dimensions_than_its_variable_is_refused(attacked) -> None:
    """Found by ct-io-fuzz under ASan: a PUT of ndims 1 on a variable of 2 dimensions had
    PnetCDF take the second count left by an earlier request and read past the buffer sized
    for the first (heap-buffer-overflow in ncmpio_pack_xbuf)."""
    port, _, _, ca, service = attacked
    s = tls(ca, "alice", port)
    assert hello(s) == 0
    requests = [
        frame(2, struct.pack("<ii", 0, 0) + struct.pack("<I", 11) + b"sub/dims.nc"),
        frame(5, struct.pack("<iI", 0, 1) + b"x" + struct.pack("<q", 4)),
        frame(5, struct.pack("<iI", 0, 1) + b"y" + struct.pack("<q", 4)),
        frame(6, struct.pack("<iI", 0, 4) + b"data" + struct.pack("<iIii", 4, 2, 0, 1)),
        frame(7, struct.pack("<i", 0)),
    ]
    for request in requests:
        s.sendall(request)
        assert reply(s) == 0
    whole = struct.pack("<iiBIqqqq", 0, 0, 1, 2, 0, 4, 0, 4)  # 4 x 4 ints: its counts stay
    s.sendall(frame(13, whole) + frame(15, bytes(64)))
    assert reply(s) == 0
    short = struct.pack("<iiBIqq", 0, 0, 1, 1, 0, 4)  # ndims 1 on the 2-d variable
    s.sendall(frame(13, short) + frame(15, bytes(16)))
    assert reply(s) == -36  # NC_EINVAL
    s.sendall(frame(16, struct.pack("<i", 0)))
    assert reply(s) == 0
    s.sendall(frame(17))
    s.close()
    log = log_of(service)
    assert not SANITIZER_REPORT.search(log), log
    assert service.running
