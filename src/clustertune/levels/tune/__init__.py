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

from .. import Level, register

LEVEL = register(Level("tune", "Tuning: Linpack settings from measurements", order=90))

from . import cli, demo, section, summary  # noqa: E402, F401  (they hang their parts on LEVEL)
