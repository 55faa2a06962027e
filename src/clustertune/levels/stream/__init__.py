"""Node level: sustainable memory bandwidth after STREAM (Copy, Scale, Add, Triad), our own
C11 + MPI kernel (kernels/stream/), every rank on its own arrays of at least 4 x the
last-level caches, verified as STREAM verifies; per rank, per host and for the whole job,
for every rank count from 1 to the cores of a host and across the hosts of a cluster
(docs/stream.md).

run.py       running ct-stream (one rank count or a sweep), STREAM's table from the record
cli.py       `clustertune stream`
section.py   the report section (bandwidth per loop against the rank count, per host)
summary.py   the report's first-screen row
demo.py      the step in `make demo`
steps.py     the study step kind "stream"
"""

from .. import Kernel, Level

KERNEL = "ct-stream"

LEVEL = Level(
    name="stream",
    title="Node level: memory bandwidth (STREAM)",
    after="linpack",
    kernels=(Kernel(KERNEL, "stream"),),
    commands="cli:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:step",
    study_kinds="steps:KINDS",
)
