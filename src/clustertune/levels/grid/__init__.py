"""Grid level (seeds/000): several sites used as one machine (docs/grid.md).

The machinery lives in clustertune/grid/ (virtual grid, per-site schedulers, the
submission interface, co-allocation, the grid launcher, the grid description); this
package is the level: its commands, and the cluster sources it registers (a running
virtual grid, a grid description file), so every other level runs on a grid unchanged.

commands.py  `clustertune grid up|down|status|submit|compare`
compare.py   seeds/000's comparison: a kernel inside one site vs across sites
section.py   the report section
demo.py      the step in `make demo`
"""

from ... import sources
from ...grid import description, source
from .. import Level, register

LEVEL = register(Level("grid", "Grid: several sites as one machine", order=70))

sources.register(source.VirtualGrid(), before="vcluster")
sources.register(description.GridFile(), before="file")

from . import commands, demo, section, summary  # noqa: E402, F401  (they hang their parts on LEVEL)
