"""Probe: the first kernel, proving the launch chain end to end. Every rank reports its
rank, host and MPI library; the kernel checks that the ranks form one MPI_COMM_WORLD.

run.py      the command, the demo step and the report section
summary.py  the launch chain's row of the report's first screen
"""

from .. import Kernel, Level

KERNEL = "ct-probe"

LEVEL = Level(
    name="probe",
    title="Launch chain (probe)",
    after="hosts",  # before anything that launches a measurement
    kernels=(Kernel(KERNEL, "probe"),),
    commands="run:add_commands",
    section="run:section",
    summary="summary:rows",
    demo="run:demo",
)
