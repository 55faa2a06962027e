"""Arguments of ``clustertune io netcdf``."""

from __future__ import annotations

from ...commands import add_job_options
from . import LEVEL, netcdf


@LEVEL.commands
def add_commands(sub, common) -> None:
    p = sub.add_parser("io", help="parallel I/O: netCDF (PnetCDF) local and remote")
    psub = p.add_subparsers(dest="io_command", required=True)

    n = psub.add_parser("netcdf", parents=[common], help="netCDF collective/independent I/O")
    add_job_options(n, timeout=netcdf.TIMEOUT_S)
    n.add_argument("--sizes", default=",".join(map(str, netcdf.SIZES)),
                   help="array orders N (N^3 ints), comma-separated")  # fmt: skip
    n.add_argument("--mode", choices=netcdf.MODES, default="both")
    n.add_argument("--ops", default="write,read", help="write, read or write,read")
    n.add_argument("--format", choices=netcdf.FORMATS, default="cdf1")
    n.add_argument("--reps", type=int, default=netcdf.REPS, help="repetitions (min, median)")
    n.add_argument("--driver", choices=tuple(netcdf.DRIVERS), default="romio",
                   help="OpenMPI's MPI-IO component (default romio: OMPIO is slow on small "
                        "files)")  # fmt: skip
    n.add_argument("--no-raw", action="store_true", help="leave out raw MPI-IO of the same bytes")
    n.add_argument("--dir", help="directory every host sees (default: a new one under /tmp)")
    n.add_argument("--keep-files", action="store_true", help="keep the files written")
    n.add_argument("--inject-fault", action="store_true", help="tests: the check must FAIL")
    n.set_defaults(func=netcdf.cmd_netcdf)
