"""The catalogue of levels: every package under clustertune/levels/ with a manifest
(``LEVEL``, see :mod:`clustertune.levels`), in their declared order.

Only the manifests are imported here, never a level's parts: this module is what the
kernel finder asks, and the parts run kernels. Each reader asks a level for the part it
needs (:meth:`clustertune.levels.Level.part`).

The order (report sections, demo steps, the first screen's rows) follows each level's
``after``: the first level has ``after=""``; the others sort by the length of their chain
of ``after`` back to it, then by name, so a chain keeps its order and two levels placed
after the same one stand side by side in name order.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from collections.abc import Iterable
from dataclasses import replace

from . import levels
from .levels import Kernel, Level


@functools.cache
def all_levels() -> tuple[Level, ...]:
    found: dict[str, Level] = {}
    for info in pkgutil.iter_modules(levels.__path__):
        if not info.ispkg:
            continue
        package = f"{levels.__name__}.{info.name}"
        level = getattr(importlib.import_module(package), "LEVEL", None)
        if not isinstance(level, Level):
            raise ValueError(f"{package}: no LEVEL = Level(...) in its __init__.py")
        if level.name in found:
            raise ValueError(f"level {level.name!r} declared by two packages")
        found[level.name] = replace(level, package=package)
    return ordered(found.values())


def ordered(found: Iterable[Level]) -> tuple[Level, ...]:
    """The levels in their declared order; a misplaced level is an error of its manifest."""
    by_name = {lv.name: lv for lv in found}
    firsts = sorted(name for name, lv in by_name.items() if not lv.after)
    if len(firsts) > 1:
        raise ValueError(f"levels {', '.join(firsts)} all have after='': one level is first")
    return tuple(sorted(by_name.values(), key=lambda lv: (_depth(lv, by_name), lv.name)))


def _depth(level: Level, found: dict[str, Level]) -> int:
    """How many ``after`` links lead from ``level`` back to the first level."""
    seen = [level.name]
    while level.after:
        if level.after not in found:
            raise ValueError(f"level {level.name!r}: after={level.after!r} names no level")
        level = found[level.after]
        if level.name in seen:
            raise ValueError(f"levels placed after each other in a circle: {' -> '.join(seen)}")
        seen.append(level.name)
    return len(seen) - 1


def level(name: str) -> Level | None:
    return next((lv for lv in all_levels() if lv.name == name), None)


def kernels() -> list[Kernel]:
    """Every kernel the levels declare (the tools of the virtual cluster and the launchers
    are declared in clustertune.kernels)."""
    return [k for lv in all_levels() for k in lv.kernels]
