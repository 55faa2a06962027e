"""A small certificate authority, X.509 certificates and the grid-mapfile, in the GSI model
of seeds/000: one tool for the whole project. Remote I/O uses it for mutual TLS between
libct_ncfwd and ct-io-server; the grid level for authenticated access to sites (only a
mapped subject runs jobs). Nothing here knows about either.

Layout of a CA directory (``clustertune io ca init``; default ``$CLUSTERTUNE_CA`` or
``~/.local/share/clustertune/ca``)::

    ca.pem ca.key            the authority (EC P-256, self-signed; RSA 2048 with ``rsa``)
    NAME.pem NAME.key        certificates it issued (``io ca issue NAME [--server]``)
    grid-mapfile             "SUBJECT" AREA [rw|ro], one line per subject (``io ca grant``)

Subjects are written as OpenSSL's one-line form (``/C=JP/O=clustertune/OU=user/CN=alice``),
the form the server compares. Keys are made with the ``openssl`` command (Debian's), mode 0600:
EC P-256 by default (remote I/O), RSA 2048 with ``rsa=True`` (GSI: the Grid Community
Toolkit's proxies are RSA and signed by the user's key; the grid's GRAM sites use it).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
from dataclasses import dataclass
from pathlib import Path

from .errors import UserError

ORG = "/C=JP/O=clustertune"
CA_SUBJECT = f"{ORG}/CN=clustertune CA"
DAYS = 825
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
GRIDMAP = "grid-mapfile"
RIGHTS = ("rw", "ro")


def default_dir() -> Path:
    env = os.environ.get("CLUSTERTUNE_CA")
    return Path(env) if env else Path.home() / ".local/share/clustertune/ca"


@dataclass(frozen=True)
class Credentials:
    """What one party presents: its certificate and key, and the CA it trusts."""

    cert: Path
    key: Path
    ca: Path

    def env(self) -> dict[str, str]:
        """The client library's variables (libct_ncfwd)."""
        return {"CT_NCFWD_CERT": str(self.cert), "CT_NCFWD_KEY": str(self.key),
                "CT_NCFWD_CA": str(self.ca)}  # fmt: skip


def _openssl(*args: str) -> None:
    out = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise UserError(f"openssl {shlex.join(args[:2])}: {out.stderr.strip()[-300:]}")


def _key(path: Path, rsa: bool = False) -> None:
    algorithm = ["RSA", "-pkeyopt", "rsa_keygen_bits:2048"] if rsa else [
        "EC", "-pkeyopt", "ec_paramgen_curve:P-256"]  # fmt: skip
    _openssl("genpkey", "-algorithm", *algorithm, "-out", str(path))
    path.chmod(0o600)


def init_ca(directory: Path, rsa: bool = False) -> Path:
    """The CA in ``directory`` (made once; an existing one is kept). Its certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "ca.pem", directory / "ca.key"
    if not cert.is_file():
        _key(key, rsa)
        _openssl("req", "-x509", "-new", "-key", str(key), "-subj", CA_SUBJECT, "-days",
                 str(DAYS), "-out", str(cert), "-addext", "basicConstraints=critical,CA:TRUE",
                 "-addext", "keyUsage=critical,keyCertSign,cRLSign")  # fmt: skip
    (directory / GRIDMAP).touch()
    return cert


def subject_of(name: str, server: bool = False) -> str:
    return f"{ORG}/OU={'server' if server else 'user'}/CN={name}"


def _ca(directory: Path) -> Path:
    """The CA's certificate in ``directory``; a user error when there is none."""
    ca = directory / "ca.pem"
    if not ca.is_file():
        raise UserError(f"no CA in {directory}: run 'clustertune io ca init' first")
    return ca


def issue(directory: Path, name: str, *, server: bool = False, days: int = DAYS,
          rsa: bool = False) -> Credentials:  # fmt: skip
    """A certificate for ``name`` signed by the CA in ``directory`` (re-issued if present).
    A negative ``days`` gives one that expired that many days ago (tests of refusal)."""
    if not NAME.match(name):
        raise UserError(f"certificate name {name!r}: letters, digits, '.', '_', '-' only")
    if name == "ca":
        raise UserError("certificate name 'ca' is the authority's own")
    ca = _ca(directory)
    key, cert, csr = directory / f"{name}.key", directory / f"{name}.pem", directory / f"{name}.csr"
    _key(key, rsa)
    _openssl("req", "-new", "-key", str(key), "-subj", subject_of(name, server), "-out", str(csr))
    usage = "serverAuth" if server else "clientAuth"
    ext = directory / f"{name}.ext"
    ext.write_text(f"basicConstraints=CA:FALSE\nextendedKeyUsage={usage}\n")
    try:
        _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey",
                 str(directory / "ca.key"), "-CAcreateserial", "-days", str(days),
                 "-extfile", str(ext), "-out", str(cert))  # fmt: skip
    finally:
        csr.unlink(missing_ok=True)
        ext.unlink(missing_ok=True)
    return Credentials(cert, key, ca)


def credentials(directory: Path, name: str) -> Credentials:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    if not cert.is_file() or not key.is_file():
        raise UserError(f"no certificate {name!r} in {directory}: 'clustertune io ca issue {name}'")
    return Credentials(cert, key, directory / "ca.pem")


def check_area(area: str) -> str:
    if area.startswith("/") or ".." in Path(area).parts or not area or '"' in area:
        raise UserError(f"area {area!r}: a directory relative to the export ('.' for all of it)")
    return area


def grant(directory: Path, subject: str, area: str = ".", right: str = "rw") -> Path:
    """Maps ``subject`` to ``area`` (relative to the server's export) with ``right`` in the
    grid-mapfile, replacing any earlier line for the subject. The file."""
    if right not in RIGHTS:
        raise UserError(f"right {right!r}: one of {', '.join(RIGHTS)}")
    _ca(directory)  # the grid-mapfile lives beside the CA that signs its subjects
    return _map(directory / GRIDMAP, subject, f"{check_area(area)} {right}")


def map_account(path: Path, subject: str, account: str) -> Path:
    """GSI's form of the grid-mapfile (a GRAM gatekeeper's): ``"SUBJECT" ACCOUNT``, the
    local account the subject's jobs run as, replacing any earlier line for it."""
    if not NAME.match(account):
        raise UserError(f"account {account!r}: letters, digits, '.', '_', '-' only")
    return _map(path, subject, account)


def _map(path: Path, subject: str, rest: str) -> Path:
    if '"' in subject or "\n" in subject or not subject.startswith("/"):
        raise UserError(f"subject {subject!r}: expected the one-line form /C=../O=../CN=..")
    lines = path.read_text().splitlines() if path.is_file() else []
    kept = [line for line in lines if not line.startswith(f'"{subject}"')]
    kept.append(f'"{subject}" {rest}')
    path.write_text("\n".join(kept) + "\n")
    return path


def gridmap_entries(path: Path) -> dict[str, tuple[str, str]]:
    """subject -> (area, right), as the server reads the file."""
    entries = {}
    for line in path.read_text().splitlines() if path.is_file() else []:
        m = re.match(r'^\s*"([^"]+)"\s+(\S+)(?:\s+(rw|ro))?', line)
        if m:
            entries[m[1]] = (m[2], m[3] or "rw")
    return entries
