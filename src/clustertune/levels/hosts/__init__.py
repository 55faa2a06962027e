"""Host facts (``clustertune info``), the first level: the resource information of every
host, gathered on the host itself through the cluster's launcher and stored like a
measurement, so the report shows what each run ran on.

info.py     collecting, the command, the demo step and the report section
summary.py  the inventory's row of the report's first screen
"""

from .. import Level

LEVEL = Level(
    name="hosts",
    title="Hosts",
    after="",  # the first: what every later run ran on
    commands="info:add_commands",
    section="info:section",
    summary="summary:rows",
    demo="info:demo",
)
