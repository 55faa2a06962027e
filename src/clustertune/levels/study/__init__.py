"""The papers' experiments as declarative studies (clustertune.studies): ``clustertune
study list|run|report`` and the demo's studies. A level without kernels, records or a
report section of its own: a study's points are stored as the records of the levels they
run, tagged ``meta.study``, and each study has its own page.

cli.py   the commands
demo.py  the step in `make demo`
"""

from .. import Level

LEVEL = Level(
    name="study",
    title="Studies: the papers' experiments",
    after="tune",  # the longest step last
    commands="cli:add_commands",
    demo="demo:demo",
)
