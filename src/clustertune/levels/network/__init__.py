"""Network and message-passing levels: ping-pong over TCP, MPI and PVM, and all-pairs diagnosis.

One level in the store (``network``): the message-passing figures are read against raw
TCP on the same pair, so both live in one section (``params.layer`` tells them apart).

analysis.py   derived figures of one sweep (pure functions; docs/figures.md)
diagnosis/    one module per diagnosis: which host or link is at fault (pure functions)
plots.py      the graphs as SVG
pingpong.py   net pingpong: one pair, one layer, one record per run
matrix.py     net matrix: all pairs in rounds, diagnosis with re-test
schedule.py   ... what runs where and when (rounds, a pair's runs, CPU placement)
reach.py      ... which hosts it can run on (TCP checks, flapping links)
counters.py   ... NIC carrier changes and TCP retransmissions
matrix_output.py  ... its JSON and text
pvm.py        the PVM virtual machine a PVM run needs
cli.py        the two commands' arguments
section.py    the report section
demo.py       the step in make demo
"""

from .. import SERIAL, Kernel, Level

TCP_KERNEL = "ct-tcp-pingpong"
MPI_KERNEL = "ct-mpi-pingpong"
PVM_KERNEL = "ct-pvm-pingpong"

LEVEL = Level(
    name="network",
    title="Network and message passing (TCP, MPI, PVM)",
    after="probe",  # before the application levels, whose figures it explains
    kernels=(
        Kernel(TCP_KERNEL, "network", (SERIAL,)),
        Kernel(PVM_KERNEL, "pvm", (SERIAL,)),
        Kernel(MPI_KERNEL, "mpi"),
    ),
    commands="cli:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:demo",
    study_kinds="steps:KINDS",
)
