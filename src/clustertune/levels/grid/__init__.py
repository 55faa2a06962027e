"""Grid level (seeds/000): several sites used as one machine (docs/grid.md).

The machinery lives in clustertune/grid/ (virtual grid, per-site schedulers, the
submission interface, co-allocation, the grid launcher, the grid description); this
package is the level: its commands, and the cluster sources it declares (a running
virtual grid, a grid description file), so every other level runs on a grid unchanged.

commands.py  `clustertune grid up|down|status|submit|compare`
compare.py   seeds/000's comparison: a kernel inside one site vs across sites
section.py   the report section
demo.py      the step in `make demo`
sources.py   the cluster sources behind --cluster (clustertune.sources)
launchers.py the grid launcher (clustertune.launch.launchers)
"""

from .. import Level

LEVEL = Level(
    name="grid",
    title="Grid: several sites as one machine",
    after="io",
    commands="commands:add_commands",
    section="section:render",
    summary="summary:rows",
    demo="demo:demo",
    cluster_sources="sources:SOURCES",
    launchers="launchers:LAUNCHERS",
)
