"""Studies: the papers' experiments as small declarative TOML files (data/*.toml) that
``clustertune study run`` executes point by point through the levels' own APIs, storing
each point as a normal run tagged ``meta.study``, and ``study report`` renders beside
the papers' numbers (data/ref-*.csv) with each finding marked reproduced or not.

spec.py       the study file: fields, errors naming file:line:field, the points
kinds.py      what a step kind is (each level declares its own: levels/*/steps.py)
catalog.py    the levels' step kinds by name
execute.py    running: virtual clusters, tagging, resume by skipping stored points
findings.py   the papers' qualitative findings checked on the records
reference.py  the papers' numbers (CSV)
page.py       the study's HTML page
"""
