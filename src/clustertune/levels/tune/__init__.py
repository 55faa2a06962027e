"""Tuning: measurements turned into settings (docs/tune.md).

``clustertune tune linpack`` searches the BLAS, ranks x BLAS threads, NB, P x Q and
HPL's algorithm variants with ct-linpack/ct-gemm runs (each stored at level
``linpack``, tagged with the session), writes an HPL.dat and stores one ``tune`` record
per session whose section explains each choice in one line. ``tune tcp`` chooses a
socket buffer size, ``tune qcd`` a QCD decomposition, each from its level's runs.

space.py     the search space and the derivations (no running)
linpack.py   the stages of the search
hpldat.py    the HPL.dat writer
tcp.py       the TCP socket buffer
qcd.py       the QCD process grid
cli.py       the command
section.py   the report section
"""

from .. import Level

LEVEL = Level(
    name="tune",
    title="Tuning: Linpack settings from measurements",
    after="grid",  # reads the measuring levels' runs
    commands="cli:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:demo",
)
