"""Network and message-passing levels: ping-pong over TCP, MPI and PVM, and all-pairs diagnosis.

analysis.py   derived figures (pure functions; docs/figures.md)
plots.py      the graphs as SVG
pingpong.py   net pingpong: one pair, one layer, one record per run
matrix.py     net matrix: all pairs in rounds, diagnosis with re-test
cli.py        the two commands' arguments
section.py    the report section
"""

from . import section  # noqa: F401  (registers the report section)
from .cli import add_commands
from .demo import demo

ORDER = 20  # in the demo: after the probe, before the application levels

__all__ = ["ORDER", "add_commands", "demo"]
