"""Application level: lattice QCD after QCDMPI (seeds/003 section 4). ct-qcd updates an
SU(3) pure gauge field (Wilson plaquette action; Cabibbo-Marinari heat bath with
Kennedy-Pendleton SU(2) updates plus over-relaxation) on any np1 x np2 x np3 x np4 process
grid, verifies itself (cold-start plaquette exactly 1, SU(3) to 1e-12, gauge invariance,
checksummed halos) and reports QCDFlops with and without communication (docs/qcd.md).

run.py       `clustertune qcd`: arguments to the kernel, derived figures, text
study.py     `clustertune qcd study`: the paper's decompositions (its table 2), figs 7-9
paper.py     seeds/003's QCD tables (paper_qcd.json) and the literature plaquettes
section.py   the report section
demo.py      the step in `make demo`
cli.py       the commands' arguments
"""

from .. import Kernel, Level

KERNEL = "ct-qcd"

LEVEL = Level(
    name="qcd",
    title="Application level: lattice QCD (QCDMPI)",
    after="npb",  # the paper's order: NPB, then QCDMPI
    kernels=(Kernel(KERNEL, "qcd"),),
    commands="cli:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:demo",
    study_kinds="steps:KINDS",
)
