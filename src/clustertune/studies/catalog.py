"""The study step kinds every level declares (its manifest's ``study_kinds`` part), by
name. Apart from clustertune.studies.kinds so that the levels' kinds, which use it, are
not imported by it."""

from __future__ import annotations

import functools

from .. import catalog
from .kinds import Kind


@functools.cache
def kinds() -> dict[str, Kind]:
    found: dict[str, Kind] = {}
    for level in catalog.all_levels():
        for kind in level.part("study_kinds") or ():
            if kind.name in found:
                raise ValueError(f"study step kind {kind.name!r} declared twice")
            found[kind.name] = kind
    return found
