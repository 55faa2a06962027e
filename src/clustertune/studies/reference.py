"""The papers' numbers, typed in once as CSV beside the study files:
``paper,item,machine,quantity,value,unit,source`` (item: the table or figure; source: where
in the paper, and any note). Read by the study pages."""

from __future__ import annotations

import csv
from pathlib import Path

from ..errors import ConfigError

COLUMNS = ("paper", "item", "machine", "quantity", "value", "unit", "source")


def load(path: Path) -> list[dict]:
    rows = []
    with path.open(newline="") as handle:
        reader = csv.DictReader(handle)
        if tuple(reader.fieldnames or ()) != COLUMNS:
            raise ConfigError(str(path), 1, "header", f"expected {','.join(COLUMNS)}")
        for number, row in enumerate(reader, start=2):
            try:
                row["value"] = float(row["value"])
            except (TypeError, ValueError):
                raise ConfigError(
                    str(path), number, "value", f"not a number: {row['value']!r}"
                ) from None
            rows.append(row)
    return rows
