"""The inventory's row of the report's first screen (clustertune.summary): per cluster,
the newest ``info`` and whether it read every host."""

from __future__ import annotations

from ... import summary
from .info import unreachable_of


def rows(records: list[dict]) -> list[summary.Row]:
    newest = {r["meta"]["cluster"]["name"]: r for r in records}
    out = []
    for cluster, r in newest.items():
        found = r["samples"]
        kinds = {(h["cpu"]["model"], h["cpu"]["cores"], h["memory_bytes"]) for h in found}
        if not found:
            figure = "no host read"
        elif len(kinds) == 1:
            model, cores, memory = kinds.pop()
            shown = f"{memory / 2**30:.1f} GiB" if memory else "memory not read"
            figure = f"{len(found)} x {model}, {cores} cores, {shown}"
        else:
            figure = f"{len(found)} hosts of {len(kinds)} kinds"
        missing = unreachable_of(r)
        out.append(
            summary.Row(
                f"inventory ({cluster})",
                figure,
                run=r["id"],
                verdict=f"{len(missing)} host(s) not read" if missing else "every host read",
                state=summary.BAD if missing else summary.GOOD,
                over_wire=False,
            )
        )
    return out
