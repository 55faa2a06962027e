"""Arguments of ``clustertune io netcdf``."""

from __future__ import annotations

from ...commands import add_job_options
from ...launch import mpi as mpi_flavours
from . import commands as commands_io
from . import netcdf, remote


def add_commands(sub, common) -> None:
    p = sub.add_parser("io", help="parallel I/O: netCDF (PnetCDF) local and remote")
    psub = p.add_subparsers(dest="io_command", required=True)

    n = psub.add_parser("netcdf", parents=[common], help="netCDF collective/independent I/O")
    add_job_options(n, timeout=netcdf.TIMEOUT_S)
    n.add_argument(
        "--sizes",
        default=",".join(map(str, netcdf.SIZES)),
        help="array orders N (N^3 ints), comma-separated",
    )
    n.add_argument("--mode", choices=netcdf.MODES, default="both")
    n.add_argument("--ops", default="write,read", help="write, read or write,read")
    n.add_argument("--format", choices=netcdf.FORMATS, default="cdf1")
    n.add_argument("--reps", type=int, default=netcdf.REPS, help="repetitions (min, median)")
    n.add_argument(
        "--driver",
        choices=mpi_flavours.IO_DRIVERS,
        default="romio",
        help="OpenMPI's MPI-IO component (default romio: OMPIO is slow on small files)",
    )
    n.add_argument("--no-raw", action="store_true", help="leave out raw MPI-IO of the same bytes")
    n.add_argument("--dir", help="directory every host sees (default: a new one under /tmp)")
    n.add_argument("--keep-files", action="store_true", help="keep the files written")
    n.add_argument("--inject-fault", action="store_true", help="tests: the check must FAIL")
    n.add_argument(
        "--remote",
        help="SITE (a server started there for the run) or HOST:PORT "
        "(a running 'clustertune io serve'): files on that cluster",
    )
    n.add_argument("--servers", type=int, help="server ranks (default: one per client rank)")
    n.add_argument(
        "--no-batch",
        action="store_true",
        help="one round trip per metadata call (the paper's forwarding)",
    )
    n.add_argument(
        "--session",
        choices=("job", "file"),
        default="job",
        help="one connection per job, or per open/close (the paper)",
    )
    n.add_argument(
        "--server-round",
        metavar="BYTES",
        help="with --remote SITE: the server's put/get rounds per client (default "
        "4M; 0: each block crosses whole, then one PnetCDF call)",
    )
    n.add_argument(
        "--ca-dir", help="CA directory (default $CLUSTERTUNE_CA or ~/.local/share/clustertune/ca)"
    )
    n.add_argument("--identity", default="client", help="the client's certificate name")
    n.set_defaults(func=netcdf.cmd_netcdf)

    s = psub.add_parser("serve", parents=[common], help="run the forwarding I/O server")
    s.add_argument("--host", help="host to run it on (default: the cluster's first)")
    s.add_argument("--np", type=int, default=1, help="server ranks (default 1)")
    s.add_argument("--export", required=True, help="the only directory clients may use")
    s.add_argument("--port", type=int, default=0, help="TCP port of rank 0 (default: any)")
    s.add_argument("--sessions", type=int, default=0, help="exit after N sessions (0: never)")
    s.add_argument(
        "--idle-timeout",
        type=float,
        default=60.0,
        help="seconds a client may be silent before its session is ended",
    )
    s.add_argument(
        "--handshake-timeout",
        type=float,
        default=remote.HANDSHAKE_S,
        help="seconds a connection has for its TLS handshake and HELLO",
    )
    s.add_argument("--lifetime", type=float, help="stop after this many seconds")
    s.add_argument("--driver", choices=mpi_flavours.IO_DRIVERS, default="romio")
    s.add_argument(
        "--round",
        metavar="BYTES",
        help="put/get bytes per client per round "
        "(default 4M; 0: each block crosses whole, then one PnetCDF call)",
    )
    s.add_argument(
        "--max-session-memory",
        metavar="BYTES",
        help="request buffers one server rank may hold at once; a put/get needing more is "
        "refused (default: half the host's memory shared by the ranks on it)",
    )
    s.add_argument("--ca-dir", help="CA directory with server.pem/key and the grid-mapfile")
    s.set_defaults(func=commands_io.cmd_serve)

    c = psub.add_parser("ca", help="a small CA, certificates and the grid-mapfile")
    csub = c.add_subparsers(dest="ca_command", required=True)
    for name, helptext in (
        ("init", "create the CA"),
        ("issue", "issue a certificate"),
        ("grant", "map a subject to an area in the grid-mapfile"),
        ("revoke", "revoke a certificate (the CRL the server reads)"),
        ("show", "list certificates and the grid-mapfile"),
    ):
        a = csub.add_parser(name, parents=[common], help=helptext)
        a.add_argument(
            "--ca-dir",
            help="CA directory (default $CLUSTERTUNE_CA or ~/.local/share/clustertune/ca)",
        )
        if name == "issue":
            a.add_argument("name", help="certificate name (CN)")
            a.add_argument("--server", action="store_true", help="a server certificate")
            a.add_argument(
                "--host",
                action="append",
                help="a server's host name or address (subjectAltName; repeat for several)",
            )
        if name == "revoke":
            a.add_argument("name", help="certificate name")
        if name == "grant":
            a.add_argument("name", help="certificate name, or an RFC 2253 subject CN=..,O=..")
            a.add_argument("--area", default=".", help="directory under the export")
            a.add_argument("--right", choices=("rw", "ro"), default="rw")
        a.set_defaults(func=commands_io.cmd_ca)
