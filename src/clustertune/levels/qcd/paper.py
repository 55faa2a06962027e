"""seeds/003's QCDMPI tables (paper_qcd.json, source cited inside): the decompositions of
its table 2, the Gflops and throughput of its tables 3-5, and the literature plaquettes
the physics check compares with (shared/research/npb-qcd.md section 7)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

DATA = Path(__file__).with_name("paper_qcd.json")


@cache
def paper() -> dict:
    return json.loads(DATA.read_text())


def table2(np: int) -> dict[int, tuple[int, ...]] | None:
    """The paper's decomposition per split-dimension count for 16, 32 or 64 processes."""
    rows = paper()["table2"].get(str(np))
    return {int(k): tuple(v) for k, v in rows.items()} if rows else None
