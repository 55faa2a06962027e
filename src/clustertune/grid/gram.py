"""A GRAM5 gatekeeper per site (the Grid Community Toolkit: GRAM's and GSI's role in
seeds/000), really running in the site head's namespace, in front of the fork job manager
and, when GCT's Slurm job manager is installed, of the site's own Slurm (started like a
Slurm site's; the LRM's settings are the site's copy of globus-slurm.conf, its Slurm
commands wrappers that name the site's slurm.conf).

GSI with the project's CA tool (security.py, RSA keys): one throw-away CA per grid under
``<grid>/gsi/`` (its trusted-certificates directory: ``HASH.0`` and ``HASH.signing_policy``),
one user certificate and its RFC 3820 proxy, a host certificate per site, and per site a
grid-mapfile mapping the user's subject to the account jobs run as (root: the virtual
hosts are this machine's namespaces). A subject not in it, or an expired certificate, is
refused by the gatekeeper, which logs why (``<site>/gram/log/gatekeeper.log``).

The job manager writes fixed paths (../shared/research/grid-middleware.md): the mapped
account's ``~/.globus``, ``/var/lib/globus/gram_job_state``, ``/var/log/globus``, and reads
the LRMs' settings from ``/etc/globus/globus-{fork,slurm}.conf`` only; it outlives its jobs.
So the gatekeeper runs in a private mount namespace where each of those is a directory
or file of the site's own (bind mounts), and ``down`` stops every process of that mount
namespace: nothing is written or left outside the run directory. Its contact names the
host certificate's subject (``ADDRESS:2119:SUBJECT``: no DNS name is needed), and every
client and the gatekeeper get ``GLOBUS_HOSTNAME`` (callbacks use it).

``jobtype=mpi``: the site's globus-fork.conf names ``<site>/gram/mpiexec``, which runs the
job's script (jobs.py: the MPI launcher over the site's hosts, its start barrier and exit
file) with the executable and arguments the job manager passes. Clients (globusrun)
run on the grid's origin host, so submissions cross the WAN as in the seed.

A command on one host of a GRAM site, as a GRAM job: grid/gramrun.py (the grid
launcher's remote shell for those hosts).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from .. import security
from ..errors import UserError
from . import daemons, slurm

PORT = 2119
TOOLS = ("globus-gatekeeper", "globus-job-manager", "globusrun", "grid-proxy-init")
USER = "griduser"  # the grid's user certificate; its subject is mapped at every site
ACCOUNT = "root"  # the account it maps to: the virtual hosts are root's namespaces
PROXY_HOURS = 12  # globus-job-run/-submit want >= 3 h left
FORK_CONF = Path("/etc/globus/globus-fork.conf")
SLURM_CONF = Path("/etc/globus/globus-slurm.conf")  # GCT's Slurm LRM reads only this
SLURM_LRM = Path("/usr/share/perl5/Globus/GRAM/JobManager/slurm.pm")
SLURM_TOOLS = ("sbatch", "srun", "scancel", "scontrol", "salloc")
# what the job manager writes outside its configuration: a directory of the site's each
PRIVATE = {"state": "/var/lib/globus", "log": "/var/log/globus"}
# and its account's home (~/.globus/job/...): an overlay, not a bind, since the checkout,
# its venv and kernels may live under that home and the jobs must still see them
HOME = ("home", "/root")
JOB_VAR = "CT_GRID_JOB"  # the job's directory, in its RSL environment (the mpiexec wrapper)


def gsi_dir(grid_dir: Path) -> Path:
    return Path(grid_dir) / "gsi"


def contact(head: dict) -> str:
    return f"{head['address']}:{PORT}:{security.subject_of(head['name'], server=True)}"


def fronts_slurm() -> bool:
    """Is GCT's Slurm job manager installed (globus-gram-job-manager-slurm), and Slurm?
    Then a GRAM site runs its own Slurm, and the gatekeeper is in front of it too."""
    return (
        SLURM_LRM.is_file() and SLURM_CONF.is_file() and all(shutil.which(t) for t in slurm.TOOLS)
    )


def service_contact(contact: str, lrm: str) -> str:
    """``ADDRESS:PORT/jobmanager-LRM:SUBJECT``: the gatekeeper's service for ``lrm``."""
    address, port, subject = contact.split(":", 2)
    return f"{address}:{port}/jobmanager-{lrm}:{subject}"


def _slurm_conf(g: Path, site: dict) -> Path:
    """The site's copy of the Slurm LRM's settings: its Slurm commands are wrappers that
    name the site's slurm.conf (the job manager's perl helper gets a fixed environment,
    so SLURM_CONF cannot reach it), and jobtype=mpi goes to the site's mpiexec."""
    (g / "bin").mkdir(exist_ok=True)
    for tool in SLURM_TOOLS:
        # the job manager's directory (under its private ~) does not exist for slurmd
        chdir = " --chdir=/" if tool == "sbatch" else ""
        wrapper = g / "bin" / tool
        wrapper.write_text(
            f'#!/bin/sh\nSLURM_CONF={slurm.conf_path(site)} exec /usr/bin/{tool}{chdir} "$@"\n'
        )
        wrapper.chmod(0o755)
    keys = tuple(f"{k}=" for k in (*SLURM_TOOLS, "openmpi_path", "mpirun", "mpi_types"))
    lines = [line for line in SLURM_CONF.read_text().splitlines() if not line.startswith(keys)]
    lines += [f'{tool}="{g / "bin" / tool}"' for tool in SLURM_TOOLS]
    # an empty openmpi_path would put 'export PATH=no/bin' into the job (research note)
    lines += ['openmpi_path="/usr"', f'mpirun="{g / "mpiexec"}"', 'mpi_types="openmpi"', ""]
    conf = g / "globus-slurm.conf"
    conf.write_text("\n".join(lines))
    return conf


def trust_dir(ca_dir: Path, certs: Path) -> None:
    """GSI's trusted-certificates directory: the CA as HASH.0 and its signing policy (only
    subjects under the project's organisation)."""
    out = subprocess.run(
        ["openssl", "x509", "-in", str(ca_dir / "ca.pem"), "-noout", "-hash"],
        capture_output=True,
        text=True,
        check=True,
    )
    h = out.stdout.strip()
    certs.mkdir(parents=True, exist_ok=True)
    shutil.copy(ca_dir / "ca.pem", certs / f"{h}.0")
    (certs / f"{h}.signing_policy").write_text(
        f"access_id_CA X509 '{security.CA_SUBJECT}'\npos_rights globus CA:sign\n"
        f"cond_subjects globus '\"{security.ORG}/*\"'\n"
    )


def make_proxy(creds: security.Credentials, out: Path) -> subprocess.CompletedProcess:
    """grid-proxy-init: an RFC 3820 proxy of ``creds`` in ``out`` (it writes one even for
    an expired certificate, with no time left, and says so)."""
    return subprocess.run(
        [
            "grid-proxy-init",
            "-q",
            "-hours",
            str(PROXY_HOURS),
            "-cert",
            str(creds.cert),
            "-key",
            str(creds.key),
            "-out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )


def ensure_gsi(grid_dir: Path) -> Path:
    """The grid's CA, trusted directory, user certificate and proxy (made once)."""
    d = gsi_dir(grid_dir)
    ca = d / "ca"
    if not (ca / "ca.pem").is_file():
        security.init_ca(ca, rsa=True)
        trust_dir(ca, d / "certs")
        made = make_proxy(security.issue(ca, USER, rsa=True), d / "proxy.pem")
        if made.returncode != 0:
            raise UserError(f"grid-proxy-init: {made.stderr.strip()[-300:]}")
        (d / "home").mkdir(exist_ok=True)
    return d


def _origin(grid: dict) -> dict:
    """The grid's origin host (the user's machine), where its GRAM clients run."""
    return next(h for s in grid["sites"] for h in s["hosts"] if h["name"] == grid["origin"])


def client_env(grid: dict, origin: dict) -> dict[str, str]:
    """The GSI client's variables on ``origin``: the grid's trust directory and proxy (a
    caller's X509_USER_PROXY wins: another identity), a HOME under the run directory."""
    d = gsi_dir(grid["dir"])
    return {
        "HOME": str(d / "home"),
        "X509_CERT_DIR": str(d / "certs"),
        "X509_USER_PROXY": os.environ.get("X509_USER_PROXY", str(d / "proxy.pem")),
        "GLOBUS_HOSTNAME": origin["address"],
    }


def client(grid: dict, argv: list[str]) -> list[str]:
    """argv of a GRAM client run on the grid's origin host (the user's machine)."""
    origin = _origin(grid)
    env = [f"{k}={v}" for k, v in client_env(grid, origin).items()]
    return daemons.in_namespace(origin["namespace"], ["env", *env, *argv])


def run_client(grid: dict, argv: list[str], timeout: float = 30.0) -> subprocess.CompletedProcess:
    return subprocess.run(client(grid, argv), capture_output=True, text=True, timeout=timeout)


def _quote(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


def rsl(attrs: dict) -> str:
    """A GRAM request: ``&(name=value)...``; lists are word lists, a dict (environment)
    becomes ``(NAME "value")`` pairs; every string is quoted ("" inside); empty ones are
    left out."""
    parts = []
    for name, value in attrs.items():
        if value in ([], {}):  # GRAM rejects an empty value
            continue
        if isinstance(value, dict):
            text = "".join(f"({k} {_quote(v)})" for k, v in value.items())
        elif isinstance(value, list):
            text = " ".join(_quote(str(v)) for v in value)
        else:
            text = _quote(str(value)) if isinstance(value, str) else str(value)
        parts.append(f"({name}={text})")
    return "&" + "".join(parts)


def _fork_conf(g: Path) -> Path:
    """The site's copy of the fork LRM's settings, jobtype=mpi through its mpiexec."""
    wrapper = g / "mpiexec"
    wrapper.write_text(
        "#!/bin/sh\n# GRAM's fork LRM runs jobtype=mpi as: mpiexec -n COUNT EXECUTABLE ARGS.\n"
        "# The job's script (grid/jobs.py) starts COUNT ranks over the site's hosts with\n"
        "# the job's MPI, start barrier and exit file.\n"
        f'[ "$1" = -n ] && shift 2\nexec sh "${JOB_VAR}/job.sh" "$@"\n'
    )
    wrapper.chmod(0o755)
    lines = [
        line
        for line in FORK_CONF.read_text().splitlines()
        if not line.startswith(("mpiexec=", "mpirun="))
    ]
    conf = g / "globus-fork.conf"
    conf.write_text("\n".join([*lines, f'mpiexec="{wrapper}"', 'mpirun="no"', ""]))
    return conf


def start(grid: str, site: dict, timeout: float = 30.0) -> None:
    """The site's gatekeeper (host certificate, grid-mapfile, fork job manager service);
    returns when it gives its contact. Its pid goes into ``site["pids"]``, its mount
    namespace into ``site["mntns"]`` (``stray`` finds the job managers by it)."""
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing or not FORK_CONF.is_file():
        raise UserError(
            f"site {site['name']}: the Grid Community Toolkit's GRAM is not "
            f"installed ({', '.join(missing) or FORK_CONF}): make apt"
        )
    gsi = ensure_gsi(Path(site["dir"]).parent)
    g = Path(site["dir"]) / "gram"
    for sub in (*PRIVATE, HOME[0], "services", "state/gram_job_state"):
        (g / sub).mkdir(parents=True, exist_ok=True)
    head = next(h for h in site["hosts"] if h["name"] == site["head"])
    host = security.issue(gsi / "ca", head["name"], server=True, rsa=True)
    security.map_account(g / "grid-mapfile", security.subject_of(USER), ACCOUNT)
    (g / "jm.conf").write_text(
        f"-globus-toolkit-version 6.2\n-log-pattern {g}/log/"
        f"gram_$(LOGNAME).log\n-x509-cert-dir {gsi / 'certs'}\n"
    )
    services = {"jobmanager": "fork", "jobmanager-fork": "fork"}  # the default, and by name
    binds = [(str(g / k), v) for k, v in PRIVATE.items()] + [(str(_fork_conf(g)), str(FORK_CONF))]
    if site.get("lrm") == "slurm":
        services["jobmanager-slurm"] = "slurm"
        binds.append((str(_slurm_conf(g, site)), str(SLURM_CONF)))
    for name, lrm in services.items():
        (g / "services" / name).write_text(
            "stderr_log,local_cred - /usr/sbin/globus-job-manager globus-job-manager "
            f"-conf {g / 'jm.conf'} -type {lrm}\n"
        )
    out = g / "log" / "gatekeeper.out"
    site["pids"]["gatekeeper"] = pid = daemons.start(
        grid,
        head["namespace"],
        [
            "globus-gatekeeper",
            "-f",
            "-port",
            str(PORT),
            "-grid_services",
            str(g / "services"),
            "-gridmap",
            str(g / "grid-mapfile"),
            "-x509_cert_dir",
            str(gsi / "certs"),
            "-x509_user_cert",
            str(host.cert),
            "-x509_user_key",
            str(host.key),
            "-logfile",
            str(g / "log" / "gatekeeper.log"),
            "-pidfile",
            str(g / "gatekeeper.pid"),
        ],
        out,
        uts=head["name"],
        env={"GLOBUS_HOSTNAME": head["address"]},
        binds=binds,
        overlays=[(str(g / HOME[0]), HOME[1])],
    )

    def contact_given() -> bool:
        return out.is_file() and "GRAM contact" in out.read_text(errors="replace")

    daemons.wait_for(
        f"site {site['name']}: gatekeeper up",
        contact_given,
        timeout,
        site["pids"],
        {"gatekeeper": out},
    )
    site["mntns"] = os.readlink(f"/proc/{pid}/ns/mnt")


def stray(site: dict) -> list[int]:
    """Live processes of the site's gatekeeper mount namespace (job managers, their
    helpers, the jobs they forked), wherever the gatekeeper itself is."""
    mntns = site.get("mntns")
    if not mntns:
        return []
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if os.readlink(entry / "ns" / "mnt") == mntns:
                    pids.append(int(entry.name))
            except OSError:
                continue
    return [p for p in pids if daemons.alive(p)]


def authenticate(grid: dict, site: dict) -> subprocess.Popen:
    """``globusrun -a``: does the site's gatekeeper accept the grid's proxy (mapped
    subject, valid certificate)? Started, not waited for (co-allocation asks all sites)."""
    return subprocess.Popen(
        client(grid, ["globusrun", "-a", "-r", site["contact"]]),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _log(site: dict) -> Path:
    return Path(site["dir"]) / "gram" / "log" / "gatekeeper.log"


def log_mark(site: dict) -> int:
    """Where the gatekeeper's log ends now (``refusal`` reads what comes after)."""
    return _log(site).stat().st_size if _log(site).is_file() else 0


def refusal(site: dict, answer: str, since: int) -> str:
    """globusrun's answer and the reason the gatekeeper logged after ``since``, one line
    (none when GSI refused at the client: nothing reached the site)."""
    said = " ".join(answer.split())[-300:] or "no answer"
    try:
        with _log(site).open("rb") as log:
            log.seek(since)
            new = log.read().decode(errors="replace").splitlines()
    except OSError:
        new = []
    reasons = [line.split("Failure:", 1)[1].strip() for line in new if "Failure:" in line]
    # GSS's own failure line is terse; its error chain says which check failed
    chain = [
        line.strip()
        for line in new
        if line.startswith(("globus_gsi_callback_module:", "globus_gss_assist:"))
    ]
    if not reasons:
        return said
    return f"{said}; gatekeeper log: {reasons[-1][-200:]}" + (
        f" ({chain[-1][-200:]})" if chain else ""
    )
