"""TOML input files (cluster files, grid descriptions, studies) read with errors that name
file:line:field: tomllib keeps no positions, so a line finder maps fields back."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Callable
from pathlib import Path

from .errors import ConfigError, UserError

Fail = Callable[[str, int, str, str], ConfigError]


class LineFinder:
    """Maps a field of the parsed document back to its line: tomllib keeps no positions.

    It follows ``[table]`` / ``[[array]]`` headers and ``key =`` lines, which is all these
    files use.
    """

    _HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.-]+)\s*\]\]?")
    _KEY = re.compile(r"^\s*([A-Za-z0-9_-]+)\s*=")

    def __init__(self, text: str):
        self.lines: dict[tuple[str, int, str], int] = {}
        self.tables: dict[tuple[str, int], int] = {}
        table, index, counts = "", 0, {}
        for number, line in enumerate(text.splitlines(), start=1):
            if header := self._HEADER.match(line):
                table = header.group(1)
                index = counts.get(table, 0)
                counts[table] = index + 1
                self.tables[(table, index)] = number
            elif key := self._KEY.match(line):
                self.lines.setdefault((table, index, key.group(1)), number)

    def line(self, table: str, index: int, key: str | None = None) -> int | None:
        if key is not None and (table, index, key) in self.lines:
            return self.lines[(table, index, key)]
        return self.tables.get((table, index))


def read(path: Path, what: str) -> tuple[dict, LineFinder, Fail]:
    """The parsed document, its line finder, and ``fail(table, index, key, problem)``
    which makes the ConfigError naming that field's line (``table`` "" for top keys)."""
    name = str(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise UserError(f"{name}: cannot read {what}: {exc.strerror}") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        line = re.search(r"line (\d+)", str(exc))
        raise ConfigError(name, int(line.group(1)) if line else None, "syntax", str(exc)) from None
    where = LineFinder(text)

    def fail(table: str, index: int, key: str, problem: str) -> ConfigError:
        label = f"{table}[{index}].{key}" if table else key
        return ConfigError(name, where.line(table, index, key), label, problem)

    return doc, where, fail


# One way to check a field's type, shared by every reader so their messages cannot drift.
_KIND_NAMES = {str: "a string", int: "an integer", list: "an array", dict: "a table"}


def known(fail: Fail, table: str, index: int, raw: dict, keys: set[str]) -> None:
    """Refuses a field not in ``keys``, naming the known ones."""
    for key in raw:
        if key not in keys:
            raise fail(table, index, key, f"unknown field (known: {', '.join(sorted(keys))})")


def typed(fail: Fail, table: str, index: int, raw: dict, key: str, kind: type, default=None):
    """``raw[key]`` when it is a ``kind`` (a bool is no integer), ``default`` when absent;
    any other value is the ConfigError naming the field's line."""
    if key not in raw:
        return default
    value = raw[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise fail(table, index, key, f"expected {_KIND_NAMES[kind]}, got {value!r}")
    return value


def tables(fail: Fail, doc: dict, key: str) -> list[dict]:
    """The ``[[key]]`` entries of the document ([] when absent): ``hosts = ["n1"]`` is named
    as the wrong type, not read as a table's fields."""
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
        raise fail("", 0, key, f"expected [[{key}]] tables, got {value!r}")
    return value


def choices(
    fail: Fail, table: str, index: int, raw: dict, key: str, allowed: tuple[str, ...]
) -> list[str]:
    """A string or an array of strings, each one of ``allowed`` (all of them when absent)."""
    value = raw.get(key, list(allowed))
    values = [value] if isinstance(value, str) else value
    if not isinstance(values, list) or not values:
        raise fail(table, index, key, f"expected one or an array of {', '.join(allowed)}")
    for item in values:
        if item not in allowed:
            raise fail(table, index, key, f"{item!r} is not one of {', '.join(allowed)}")
    return values
