"""The result record (one versioned JSON schema for every measurement) and its store.

A record::

    {"schema": "clustertune.record/2", "id": 12, "level": "network", "kernel": "ct-probe",
     "status": "ok|failed|incomplete|interrupted", "verification": "passed|failed|not-verified",
     "started": "2026-11-22T02:22:11Z", "elapsed_s": 1.3,
     "meta": {tool version and commit, cluster, hosts, np, mpi, blas, env knobs, command},
     "params": {...}, "samples": [...], "figures": {...}, "detail": {...}, "error": null}

The store is SQLite in WAL mode; a record is written in one transaction, so a run killed
half-way leaves the database as it was before that run.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

from .errors import UserError

# /2: meta.commands (every launch) and meta.job_ids replace /1's meta.command and
# meta.job_id; status "interrupted". Stored /1 records are read as they are.
SCHEMA = "clustertune.record/2"
STATUSES = ("ok", "failed", "incomplete", "interrupted")
VERIFICATIONS = ("passed", "failed", "not-verified")


def validate(record: dict) -> None:
    """Raise ValueError if a record breaks the schema (a bug, not a user error)."""
    if record.get("schema") != SCHEMA:
        raise ValueError(f"record schema {record.get('schema')!r} is not {SCHEMA}")
    for key in ("level", "kernel", "started", "meta", "params", "samples", "figures"):
        if key not in record:
            raise ValueError(f"record lacks {key!r}")
    if record.get("status") not in STATUSES:
        raise ValueError(f"record status {record.get('status')!r} not in {STATUSES}")
    if record.get("verification") not in VERIFICATIONS:
        raise ValueError(
            f"record verification {record.get('verification')!r} not in {VERIFICATIONS}"
        )
    if record["status"] == "ok" and record["verification"] == "failed":
        raise ValueError("a run that failed verification cannot have status ok")


def default_db_path() -> Path:
    if env := os.environ.get("CLUSTERTUNE_DB"):
        return Path(env)
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "clustertune" / "results.db"


class Store:
    def __init__(
        self, path: Path | str | None = None, *, base: Store | None = None, meta: dict | None = None
    ):
        """The database at ``path`` (default_db_path), or ``base``'s through its open
        connection (see tagged). ``meta`` is added to the meta of every record the runner
        stores through this Store."""
        self.saved: list[int] = []  # ids of the records this store saved, in order
        self.meta = {**(base.meta if base else {}), **(meta or {})}
        self._owner = base is None  # only the Store that opened the connection closes it
        if base is not None:
            self.path, self.conn = base.path, base.conn
            return
        self.path = Path(path) if path else default_db_path()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(self.path, timeout=30)
            self.conn.execute("PRAGMA journal_mode=WAL")
            with self.conn:
                self.conn.execute(
                    """CREATE TABLE IF NOT EXISTS runs (
                        id INTEGER PRIMARY KEY AUTOINCREMENT,
                        started TEXT NOT NULL, level TEXT NOT NULL, kernel TEXT NOT NULL,
                        cluster TEXT NOT NULL, status TEXT NOT NULL, verification TEXT NOT NULL,
                        record TEXT NOT NULL)"""
                )
        except (OSError, sqlite3.Error) as exc:
            raise UserError(f"results database {self.path}: {exc}") from None

    def tagged(self, **meta) -> Store:
        """The same database through another Store: its own ``saved``, and ``meta`` that
        the runner adds to every record stored through it (a study point's
        ``study={...}``). It shares this store's connection, which only this one closes."""
        return Store(base=self, meta=meta)

    def close(self) -> None:
        if self._owner:
            self.conn.close()

    def save(self, record: dict) -> int:
        """Store a record in one transaction; sets and returns its id."""
        validate(record)
        with self.conn:
            cursor = self.conn.execute(
                "INSERT INTO runs (started, level, kernel, cluster, status, verification, record)"
                " VALUES (?, ?, ?, ?, ?, ?, '')",
                (
                    record["started"],
                    record["level"],
                    record["kernel"],
                    record["meta"].get("cluster", {}).get("name", ""),
                    record["status"],
                    record["verification"],
                ),
            )
            record["id"] = cursor.lastrowid
            self.conn.execute(
                "UPDATE runs SET record = ? WHERE id = ?", (json.dumps(record), record["id"])
            )
        self.saved.append(record["id"])
        return record["id"]

    def get(self, run_id: int) -> dict:
        row = self.conn.execute("SELECT record FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            raise UserError(f"no run with id {run_id} in {self.path}")
        return json.loads(row[0])

    def list(self, level: str | None = None, limit: int | None = None) -> list[dict]:
        """Records, oldest first, optionally of one level only."""
        query, args = "SELECT record FROM runs", []
        if level:
            query += " WHERE level = ?"
            args.append(level)
        query += " ORDER BY id DESC"
        if limit:
            query += f" LIMIT {int(limit)}"
        return [json.loads(row[0]) for row in self.conn.execute(query, args)][::-1]

    def levels(self) -> list[str]:
        return [
            row[0] for row in self.conn.execute("SELECT DISTINCT level FROM runs ORDER BY level")
        ]


def scalar_figures(figures: dict) -> dict:
    """The figures that fit one column each: scalars as they are, a dict of scalars (a
    spread {min, median, max}) as ``name.key``; lists (curves, matrices) left out."""
    flat = {}
    for name, value in figures.items():
        if isinstance(value, dict):
            flat |= {f"{name}.{k}": v for k, v in value.items() if not isinstance(v, dict | list)}
        elif not isinstance(value, list):
            flat[name] = value
    return flat


def compare(a: dict, b: dict) -> dict:
    """Figures of two runs side by side, with the ratio b/a where both are numbers and both
    runs are ok: a run that is not ok (failed verification, ...) gives no ratio, and
    ``no_ratio`` says why."""
    rows = {}
    fa, fb = scalar_figures(a.get("figures", {})), scalar_figures(b.get("figures", {}))
    not_ok = [
        f"run {r['id']} is {r['status']} (verification {r['verification']})"
        for r in (a, b)
        if r["status"] != "ok"
    ]
    for name in sorted(set(fa) | set(fb)):
        va, vb = fa.get(name), fb.get(name)
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (va, vb))
        ratio = vb / va if numeric and va and not not_ok else None
        rows[name] = {"a": va, "b": vb, "ratio": ratio}
    runs = [{k: r[k] for k in ("id", "level", "kernel", "status", "verification")} for r in (a, b)]
    return {
        "a": a["id"],
        "b": b["id"],
        "levels": [a["level"], b["level"]],
        "runs": runs,
        "no_ratio": "; ".join(not_ok) or None,
        "figures": rows,
    }


def flatten_for_csv(record: dict) -> dict:
    """One CSV row per run: identity columns plus every figure as ``fig.<name>``."""
    row = {
        key: record.get(key)
        for key in ("id", "started", "level", "kernel", "status", "verification")
    }
    row["cluster"] = record["meta"].get("cluster", {}).get("name")
    row["np"] = record["meta"].get("np")
    row["mpi"] = (record["meta"].get("mpi") or {}).get("flavour")
    for name, value in scalar_figures(record.get("figures", {})).items():
        row[f"fig.{name}"] = value
    return row
