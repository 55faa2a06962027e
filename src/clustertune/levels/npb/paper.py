"""seeds/003's machines and its NPB findings (paper003.json, source cited inside): what
the report sets beside our own NPB runs. The paper's NPB figures are plots without
printed numbers, so the data file keeps the machine table, the measured network figures
and the statements of the text, not invented per-process values."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("paper003.json")


@cache
def paper() -> dict:
    return json.loads(DATA.read_text())
