"""Staging with checksums (GASS's role in seeds/000): input files reach a site's run
directory before a job, results come back after it, each transfer checked by SHA-256.

Every byte travels through the site's own access path, as a transfer to a remote site
would: a Slurm site's login node (its head, where the Slurm clients run), an ssh site
over ssh with the grid's key, a site without scheduler through the vcluster agent. The
sender hashes what it sends; the receiving side hashes what it wrote (``sha256sum`` on
the site for inputs, this process for results); a difference is a :class:`StagingError`
naming the site, the file and both digests, and the bad copy is removed.

A site's run directory is ``<site dir>/stage/<id>/``; ``stage_in`` returns it (use it as
the job's ``directory``), ``stage_out`` fetches named files from it into a local
directory, ``remove`` deletes it on the site. ``stage_binary`` sends a kernel binary
only to a site that can run it (same architecture, its shared libraries there), else
says why not.

Test switch: ``CT_GRID_CORRUPT=NAME`` flips one byte of file NAME in transit (either
direction), so a corrupted transfer can be seen.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from ..errors import UserError
from . import jobs, slurm

CORRUPT_SWITCH = "CT_GRID_CORRUPT"
TIMEOUT_S = 120.0
NAME = re.compile(r"^[A-Za-z0-9._+-]+$")


class StagingError(UserError):
    """A transfer that failed or arrived different from what was sent."""


@dataclass
class Transfer:
    site: str
    name: str
    direction: str  # "in" | "out"
    bytes: int
    sha256: str
    seconds: float


def _site(grid: dict, name: str) -> dict:
    jobs.backend(grid, name)  # names the grid's sites when unknown
    return next(s for s in grid["sites"] if s["name"] == name)


def shell(grid: dict, site: dict, command: str) -> list[str]:
    """argv running a shell command on the site's head through its access path."""
    if site["scheduler"] == "slurm":
        return slurm.client(site, ["sh", "-c", command])
    backend = jobs.backend(grid, site["name"])
    assert isinstance(backend, jobs.ShellBackend)
    return backend.shell(site["head"], command)


def _run(argv: list[str], data: bytes | None, what: str, timeout: float) -> bytes:
    try:
        out = subprocess.run(
            argv, input=data if data is not None else b"", capture_output=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        raise StagingError(f"staging: {what}: no answer within {timeout:g} s") from None
    if out.returncode != 0:
        said = out.stderr.decode(errors="replace").strip().splitlines()
        raise StagingError(
            f"staging: {what}: exit {out.returncode}: {said[-1] if said else 'no message'}"
        )
    return out.stdout


def _maybe_corrupt(name: str, data: bytes) -> bytes:
    if os.environ.get(CORRUPT_SWITCH) == name and data:
        middle = len(data) // 2
        return data[:middle] + bytes([data[middle] ^ 0x01]) + data[middle + 1 :]
    return data


def _check_name(name: str) -> None:
    if not NAME.match(name) or name in (".", ".."):
        raise StagingError(
            f"staging: {name!r}: a plain file name is needed (letters, digits, ._+-)"
        )


def run_dir(site: dict, stage_id: str) -> str:
    return str(Path(site["dir"]) / "stage" / stage_id)


def stage_in(
    grid: dict,
    site_name: str,
    files: list[str | Path],
    stage_id: str | None = None,
    timeout: float = TIMEOUT_S,
) -> tuple[str, list[Transfer]]:
    """Copy ``files`` into a new run directory on the site, each verified there; returns
    (the site's run directory, the transfers)."""
    site = _site(grid, site_name)
    stage_id = stage_id or uuid.uuid4().hex[:12]
    paths = [Path(f) for f in files]
    for p in paths:
        _check_name(p.name)
        if not p.is_file():
            raise StagingError(f"staging: {p}: no such file")
    names = [p.name for p in paths]
    if len(set(names)) != len(names):
        raise StagingError(f"staging: two inputs share a name: {', '.join(names)}")
    target = run_dir(site, stage_id)
    mkdir = f"mkdir -p {shlex.quote(target)}"
    if not paths:
        _run(shell(grid, site, mkdir), None, f"{site_name}: mkdir", timeout)
    done = []
    for p in paths:
        data = p.read_bytes()
        digest = hashlib.sha256(data).hexdigest()
        dest = shlex.quote(f"{target}/{p.name}")
        command = f"{mkdir} && cat > {dest} && sha256sum {dest}"
        begin = time.monotonic()
        what = f"{site_name}: {p.name} in"
        said = _run(shell(grid, site, command), _maybe_corrupt(p.name, data), what, timeout)
        seconds = time.monotonic() - begin
        got = said.decode(errors="replace").split()[:1]
        if got != [digest]:
            _run(shell(grid, site, f"rm -f {dest}"), None, what, timeout)
            raise StagingError(
                f"staging: {site_name}: {p.name}: checksum mismatch after the transfer in "
                f"(sent sha256 {digest}, the site has {got[0] if got else 'nothing'}); the "
                "copy was removed"
            )
        done.append(Transfer(site_name, p.name, "in", len(data), digest, round(seconds, 4)))
    return target, done


def stage_out(
    grid: dict,
    site_name: str,
    target: str,
    names: list[str],
    local_dir: str | Path,
    timeout: float = TIMEOUT_S,
) -> list[Transfer]:
    """Fetch ``names`` from the site's run directory ``target`` into ``local_dir``, each
    checked against the digest the site computes; a mismatch leaves no local copy."""
    site = _site(grid, site_name)
    local = Path(local_dir)
    local.mkdir(parents=True, exist_ok=True)
    done = []
    for name in names:
        _check_name(name)
        src = shlex.quote(f"{target}/{name}")
        what = f"{site_name}: {name} out"
        begin = time.monotonic()  # the site's digest first, then the bytes, in one call
        raw = _run(
            shell(grid, site, f"sha256sum {src} | head -c 64 && cat {src}"), None, what, timeout
        )
        seconds = time.monotonic() - begin
        said = [raw[:64].decode(errors="replace")]
        if len(raw) < 64 or not re.fullmatch(r"[0-9a-f]{64}", said[0]):
            raise StagingError(f"staging: {what}: the site gave no checksum")
        data = _maybe_corrupt(name, raw[64:])
        digest = hashlib.sha256(data).hexdigest()
        if digest != said[0]:
            raise StagingError(
                f"staging: {site_name}: {name}: checksum mismatch after the transfer out "
                f"(the site has sha256 {said[0]}, received {digest}); nothing was written"
            )
        tmp = local / f".{name}.part"
        tmp.write_bytes(data)
        tmp.replace(local / name)
        done.append(Transfer(site_name, name, "out", len(data), digest, round(seconds, 4)))
    return done


def stage_binary(
    grid: dict,
    site_name: str,
    binary: str | Path,
    target: str | None = None,
    timeout: float = TIMEOUT_S,
) -> tuple[str, Transfer]:
    """A kernel binary to the site, checksummed like any input, once the site is known to
    run it: same machine architecture, and every shared library it needs found there
    (``ldd`` on the site). Otherwise a StagingError says why not (build it on the site).
    Returns (the run directory, the transfer); the copy is made executable."""
    import platform

    site = _site(grid, site_name)
    path = Path(binary)
    here = platform.machine()
    arch = _run(shell(grid, site, "uname -m"), None, f"{site_name}: uname", timeout).decode()
    if arch.strip() != here:
        raise StagingError(
            f"staging: {site_name}: {path.name} is built for {here}, the site "
            f"runs {arch.strip()}: build the kernels on the site"
        )
    stage_id = Path(target).name if target else None
    target, (sent,) = stage_in(grid, site_name, [path], stage_id, timeout)
    dest = shlex.quote(f"{target}/{path.name}")
    said = _run(
        shell(grid, site, f"chmod 755 {dest} && ldd {dest} || true"),
        None,
        f"{site_name}: ldd",
        timeout,
    ).decode(errors="replace")
    missing = sorted({line.split()[0] for line in said.splitlines() if "not found" in line})
    if missing:
        _run(shell(grid, site, f"rm -f {dest}"), None, f"{site_name}: rm", timeout)
        raise StagingError(
            f"staging: {site_name}: {path.name} cannot run there: "
            f"{', '.join(missing)} not found on the site; build the kernels "
            "on the site or install those libraries"
        )
    return target, sent


def remove(grid: dict, site_name: str, target: str, timeout: float = TIMEOUT_S) -> None:
    site = _site(grid, site_name)
    if not target.startswith(str(Path(site["dir"]) / "stage") + "/"):
        raise StagingError(f"staging: {target}: not a run directory of {site_name}")
    _run(shell(grid, site, f"rm -rf {shlex.quote(target)}"), None, f"{site_name}: remove", timeout)


def as_dicts(transfers: list[Transfer]) -> list[dict]:
    return [asdict(t) for t in transfers]
