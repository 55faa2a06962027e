"""Application level II: the NAS Parallel Benchmarks EP, LU and BT (NPB 3.4), our own C11 +
MPI kernels verified against NPB's reference values, with NPB's Mop/s formulas, the
per-rank computation/communication split and the messages per iteration (docs/npb.md).
seeds/003 places a cluster among supercomputers with these three benchmarks.

run.py       the process-count rules, running a kernel, NPB's familiar text from the record
section.py   the report section (Mop/s per process vs np, comp/comm split, seeds/003 machines)
paper.py     seeds/003's machines and findings (data file paper003.json)
demo.py      the step in `make demo`
cli.py       `clustertune npb ep|lu|bt`
"""

from .. import Kernel, Level

KERNELS = {"ep": "ct-npb-ep", "lu": "ct-npb-lu", "bt": "ct-npb-bt"}
# the benchmarks whose kernels this version builds (kernels/npb/<bench>/; BT: its own helper)
AVAILABLE = ("ep", "lu", "bt")

LEVEL = Level(
    name="npb",
    title="Application level: NAS Parallel Benchmarks (EP, LU, BT)",
    after="linpack",
    kernels=tuple(Kernel(KERNELS[b], f"npb/{b}") for b in AVAILABLE),
    commands="cli:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:demo",
    study_kinds="steps:KINDS",
)
