"""Parallel I/O level (seeds/004): netCDF collective vs independent read and write of 3-D
int arrays through PnetCDF, beside raw MPI-IO of the same bytes (docs/io.md).

netcdf.py    `clustertune io netcdf`: runs ct-io-netcdf, checks every file it wrote
             (ncvalidator, ncdump -h, a netCDF4 read-back), the `results` list
validate.py  the file checks
section.py   the report section (time vs size, read/write, collective/independent, np)
demo.py      the step in `make demo`
cli.py       the commands' arguments
"""

from .. import Kernel, Level

NETCDF_KERNEL = "ct-io-netcdf"
FORWARD_KERNEL = "ct-io-fwd"  # the same benchmark linked with libct_ncfwd (remote)
SERVER_KERNEL = "ct-io-server"

# Debian's PnetCDF is built for OpenMPI only (../shared/research/parallel-io.md)
LEVEL = Level(
    name="io",
    title="Parallel I/O: netCDF collective and independent, local and remote",
    after="qcd",
    kernels=(
        Kernel(NETCDF_KERNEL, "io", ("openmpi",)),
        Kernel(FORWARD_KERNEL, "io"),
        Kernel(SERVER_KERNEL, "io", ("openmpi",)),
    ),
    commands="cli:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:demo",
    study_kinds="steps:KINDS",
)
