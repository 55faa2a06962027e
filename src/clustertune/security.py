"""A small certificate authority, X.509 certificates and the grid-mapfile, in the GSI model
of seeds/000: one tool for the whole project. Remote I/O uses it for mutual TLS between
libct_ncfwd and ct-io-server; the grid level for authenticated access to sites (only a
mapped subject runs jobs). Nothing here knows about either.

Layout of a CA directory (``clustertune io ca init``; default ``$CLUSTERTUNE_CA`` or
``~/.local/share/clustertune/ca``)::

    ca.pem ca.key            the authority (EC P-256, self-signed; RSA 2048 with ``rsa``)
    NAME.pem NAME.key        certificates it issued (``io ca issue NAME [--server]``)
    grid-mapfile             "SUBJECT" AREA rw|ro, one line per subject (``io ca grant``)
    crl.pem                  the revocation list (``io ca revoke NAME``; made at init)
    index.txt, serial files  ``openssl ca``'s record of what it revoked

Subjects in the grid-mapfile are full RFC 2253 distinguished names
(``CN=alice,OU=user,O=clustertune,C=JP``, as ct-io-server prints the peer's certificate and
compares it, every special character escaped); ``subject_of`` gives OpenSSL's one-line form
for ``openssl req -subj`` and GSI's grid-mapfile (the GRAM sites). The grid-mapfile is read
strictly: a line that is not ``"SUBJECT" AREA rw|ro`` (blank lines and # comments aside) is an
error naming FILE:LINE, here and in the server, with one grammar (``gridmap_entries``, tested on
the same lines from both sides). Keys are made with the ``openssl`` command
(Debian's), mode 0600:
EC P-256 by default (remote I/O), RSA 2048 with ``rsa=True`` (GSI: the Grid Community
Toolkit's proxies are RSA and signed by the user's key; the grid's GRAM sites use it).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
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
CRL = "crl.pem"
ISSUED = "issued"  # a copy of every certificate issued, NAME.SERIAL.pem (revoke finds them all)
CRL_DAYS = DAYS  # the CRL's nextUpdate: the server refuses everyone once it has passed


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
        return {
            "CT_NCFWD_CERT": str(self.cert),
            "CT_NCFWD_KEY": str(self.key),
            "CT_NCFWD_CA": str(self.ca),
        }


def _openssl(*args: str) -> None:
    out = subprocess.run(["openssl", *args], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        raise UserError(f"openssl {shlex.join(args[:2])}: {out.stderr.strip()[-300:]}")


def _key(path: Path, rsa: bool = False) -> None:
    algorithm = (
        ["RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
        if rsa
        else ["EC", "-pkeyopt", "ec_paramgen_curve:P-256"]
    )
    _openssl("genpkey", "-algorithm", *algorithm, "-out", str(path))
    path.chmod(0o600)


def init_ca(directory: Path, rsa: bool = False) -> Path:
    """The CA in ``directory`` (made once; an existing one is kept). Its certificate."""
    directory.mkdir(parents=True, exist_ok=True)
    cert, key = directory / "ca.pem", directory / "ca.key"
    if not cert.is_file():
        _key(key, rsa)
        _openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            str(key),
            "-subj",
            CA_SUBJECT,
            "-days",
            str(DAYS),
            "-out",
            str(cert),
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        )
    (directory / GRIDMAP).touch()
    if not (directory / CRL).is_file():
        _gencrl(directory)
    return cert


def subject_of(name: str, server: bool = False) -> str:
    """OpenSSL's one-line form of a subject this CA issues (``openssl req -subj``, GSI)."""
    return f"{ORG}/OU={'server' if server else 'user'}/CN={name}"


def dn_of(name: str, server: bool = False) -> str:
    """The same subject as an RFC 2253 distinguished name: the grid-mapfile's form, and what
    ct-io-server and libct_ncfwd compare (most specific part first)."""
    return f"CN={name},OU={'server' if server else 'user'},O=clustertune,C=JP"


def _ca(directory: Path) -> Path:
    """The CA's certificate in ``directory``; a user error when there is none."""
    ca = directory / "ca.pem"
    if not ca.is_file():
        raise UserError(f"no CA in {directory}: run 'clustertune io ca init' first")
    return ca


def issue(
    directory: Path,
    name: str,
    *,
    server: bool = False,
    days: int = DAYS,
    rsa: bool = False,
    hosts: tuple[str, ...] = (),
) -> Credentials:
    """A certificate for ``name`` signed by the CA in ``directory`` (re-issued if present).
    A negative ``days`` gives one that expired that many days ago (tests of refusal).
    ``hosts``: names and addresses a server answers on, as its subjectAltName (what a client
    that dials one of them checks)."""
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
    alt = ",".join(f"IP:{h}" if _is_address(h) else f"DNS:{h}" for h in hosts)
    ext.write_text(
        f"basicConstraints=CA:FALSE\nextendedKeyUsage={usage}\n"
        + (f"subjectAltName={alt}\n" if alt else "")
    )
    try:
        _openssl(
            "x509",
            "-req",
            "-in",
            str(csr),
            "-CA",
            str(ca),
            "-CAkey",
            str(directory / "ca.key"),
            "-CAcreateserial",
            "-days",
            str(days),
            "-extfile",
            str(ext),
            "-out",
            str(cert),
        )
    finally:
        csr.unlink(missing_ok=True)
        ext.unlink(missing_ok=True)
    # every certificate ever issued is kept, so a revocation reaches the earlier ones too
    serial = subprocess.run(
        ["openssl", "x509", "-in", str(cert), "-noout", "-serial"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.strip()
    (directory / ISSUED).mkdir(exist_ok=True)
    shutil.copyfile(cert, directory / ISSUED / f"{name}.{serial.partition('=')[2]}.pem")
    return Credentials(cert, key, ca)


def credentials(directory: Path, name: str) -> Credentials:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    if not cert.is_file() or not key.is_file():
        raise UserError(f"no certificate {name!r} in {directory}: 'clustertune io ca issue {name}'")
    return Credentials(cert, key, directory / "ca.pem")


def _is_address(host: str) -> bool:
    import ipaddress

    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def _ca_config(directory: Path) -> Path:
    """``openssl ca``'s configuration for revoking and CRLs (its database beside the CA)."""
    (directory / "index.txt").touch()
    if not (directory / "crlnumber").is_file():
        (directory / "crlnumber").write_text("01\n")
    cfg = directory / "openssl-ca.cnf"
    cfg.write_text(f"""[ca]
default_ca = clustertune
[clustertune]
database = {directory / "index.txt"}
crlnumber = {directory / "crlnumber"}
certificate = {directory / "ca.pem"}
private_key = {directory / "ca.key"}
default_md = sha256
default_crl_days = {CRL_DAYS}
""")
    return cfg


def _gencrl(directory: Path) -> Path:
    """(Re)writes the CA's CRL from its database: the server re-reads it when it changes."""
    crl = directory / CRL
    tmp = directory / f".{CRL}.new"
    _openssl("ca", "-config", str(_ca_config(directory)), "-gencrl", "-out", str(tmp))
    tmp.replace(crl)  # whole, never half-written under the name the server reads
    return crl


def crl_file(directory: Path) -> Path:
    """The CA's CRL, made (empty) when a CA directory from before revocation has none."""
    _ca(directory)
    return directory / CRL if (directory / CRL).is_file() else _gencrl(directory)


def revoke(directory: Path, name: str) -> Path:
    """Revokes every certificate this CA issued to ``name`` (the current one and any earlier
    one kept in issued/) and rewrites the CRL. The CRL."""
    _ca(directory)
    cert = directory / f"{name}.pem"
    if name == "ca" or not cert.is_file():
        raise UserError(f"no certificate {name!r} in {directory} to revoke")
    config = str(_ca_config(directory))
    for each in [cert, *sorted((directory / ISSUED).glob(f"{name}.*.pem"))]:
        out = subprocess.run(
            ["openssl", "ca", "-config", config, "-revoke", str(each)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        if out.returncode != 0 and "Already revoked" not in out.stderr:
            raise UserError(f"openssl ca -revoke {each.name}: {out.stderr.strip()[-300:]}")
    return _gencrl(directory)


def check_area(area: str) -> str:
    """An area to grant: the server's rule, and no blank or quote (the line must parse)."""
    if not area or not relative_below(area) or re.search(r'[\s"]', area):
        raise UserError(f"area {area!r}: a directory relative to the export ('.' for all of it)")
    return area


def check_dn(subject: str) -> str:
    """An RFC 2253 subject for the grid-mapfile (not the legacy one-line /C=../CN=.. form)."""
    escaped = re.fullmatch(r'(?:[^"\\\n]|\\.)+', subject)  # a quote only escaped (RFC 2253)
    if subject.startswith("/") or not escaped or "=" not in subject:
        raise UserError(f"subject {subject!r}: an RFC 2253 name, e.g. {dn_of('alice')}")
    return subject


def grant(directory: Path, subject: str, area: str = ".", right: str = "rw") -> Path:
    """Maps ``subject`` (RFC 2253) to ``area`` (relative to the server's export) with
    ``right`` in the grid-mapfile, replacing any earlier line for the subject. The file."""
    if right not in RIGHTS:
        raise UserError(f"right {right!r}: one of {', '.join(RIGHTS)}")
    _ca(directory)  # the grid-mapfile lives beside the CA that signs its subjects
    gridmap_entries(directory / GRIDMAP)  # a bad file is reported, not silently kept
    return _map(directory / GRIDMAP, check_dn(subject), f"{check_area(area)} {right}")


def map_account(path: Path, subject: str, account: str) -> Path:
    """GSI's form of the grid-mapfile (a GRAM gatekeeper's): ``"SUBJECT" ACCOUNT``, the
    local account the subject's jobs run as, replacing any earlier line for it."""
    if not NAME.match(account):
        raise UserError(f"account {account!r}: letters, digits, '.', '_', '-' only")
    if '"' in subject or "\n" in subject or not subject.startswith("/"):
        raise UserError(f"subject {subject!r}: expected the one-line form /C=../O=../CN=..")
    return _map(path, subject, account)


def _map(path: Path, subject: str, rest: str) -> Path:
    lines = path.read_text().splitlines() if path.is_file() else []
    kept = [line for line in lines if not line.startswith(f'"{subject}"')]
    kept.append(f'"{subject}" {rest}')
    path.write_text("\n".join(kept) + "\n")
    return path


# The grid-mapfile's grammar, the server's (io_server.c gridmap_line; docs/io.md): blanks are
# spaces and tabs only; a backslash in SUBJECT escapes the next character (RFC 2253's \"
# inside a value), kept as written; lines end at "\n" or "\r\n" and hold at most
# GRIDMAP_LINE_BYTES bytes. tests/test_io_remote.py feeds the same lines to both parsers.
GRIDMAP_LINE = re.compile(r'[ \t]*"((?:[^"\\]|\\.)+)"[ \t]+([^ \t]+)[ \t]+([^ \t]+)[ \t]*')
GRIDMAP_LINE_BYTES = 4094  # the server reads a line into 4096 bytes, "\n" and NUL included


def relative_below(area: str) -> bool:
    """The server's rule for an area: relative, and no ".." component."""
    return not area.startswith("/") and ".." not in area.split("/")


def gridmap_entries(path: Path) -> dict[str, tuple[str, str]]:
    """subject -> (area, right), read with the server's grammar (above): a line that is not
    blank, a # comment or ``"SUBJECT" AREA rw|ro``, or a second line for a subject, is a user
    error naming FILE:LINE, as the server refuses to start on it."""
    entries: dict[str, tuple[str, str]] = {}
    # bytes as the server reads them: a subject that is not UTF-8 matches nobody, no crash
    text = path.read_bytes().decode("utf-8", "surrogateescape") if path.is_file() else ""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()  # the newline ending the last line
    for n, line in enumerate(lines, 1):
        where = f"{path}:{n}"
        if "\x00" in line:  # the server's C strings would end the line there
            raise UserError(f"{where}: a NUL byte")
        if len(line.encode("utf-8", "surrogateescape")) > GRIDMAP_LINE_BYTES:
            raise UserError(f"{where}: line longer than {GRIDMAP_LINE_BYTES} bytes")
        line = line.removesuffix("\r")
        if not line.strip(" \t") or line.lstrip(" \t").startswith("#"):
            continue
        m = GRIDMAP_LINE.fullmatch(line)
        if not m:
            raise UserError(f'{where}: expected "SUBJECT" AREA rw|ro, got {line.strip()!r}')
        subject, area, right = m.groups()
        if right not in RIGHTS:
            raise UserError(f"{where}: right {right!r}: one of {', '.join(RIGHTS)}")
        if not relative_below(area):
            raise UserError(f"{where}: area {area!r}: a directory relative to the export")
        if subject in entries:
            raise UserError(f"{where}: a second line for {subject}")
        entries[subject] = (area, right)
    return entries
