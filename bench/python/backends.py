"""Checkpoint backends for the benchmark (see ../WORKLOADS.md): setup, size measurement, cleanup.

`open_backend(name, db)` is a context manager yielding a `Backend`: its `saver` (None for
`none`) and, for the persistent backends, `measure()` → `(db_bytes, rows)`.

- `none`: no checkpointer.
- `memory`: `InMemorySaver`.
- `sqlite`: `SqliteSaver` on one `sqlite3` connection. Without `--db`, a new file in a new
  temp directory, removed afterwards. db_bytes = file + `-wal` after
  `PRAGMA wal_checkpoint(TRUNCATE)` (on a separate connection).
- `postgres`: `PostgresSaver` on one psycopg connection (autocommit, prepare_threshold=0,
  dict_row), in a fresh schema `sgb_<hex>` (via `options=-c search_path=…`), dropped
  afterwards. db_bytes = `sum(pg_total_relation_size)` of the schema's tables.
- `mongodb`: `MongoDBSaver` (langgraph-checkpoint-mongodb) on one pymongo client, in a fresh
  database `sgb_<hex>` (URL: `--db`, else `STATEGRAPH_TEST_MONGODB_URL`, else the local
  mongoeco of `scripts/mongo-server.sh`), dropped afterwards. db_bytes = `collStats` size +
  index size of its two collections.

`rows` maps every table of the database/schema to its row count.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import tempfile
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

DEFAULT_POSTGRES_URL = "postgres://postgres@127.0.0.1:5432/test"
DEFAULT_MONGODB_URL = "mongodb://127.0.0.1:27117/?directConnection=true"
PERSISTENT = ("sqlite", "postgres", "mongodb")


@dataclass
class Backend:
    name: str
    saver: Any
    # (db_bytes, {table: rows}) of the persistent store; None for none/memory.
    measure: Optional[Callable[[], tuple[int, dict[str, int]]]] = None


@contextlib.contextmanager
def open_backend(name: str, db: Optional[str]) -> Iterator[Backend]:
    if name == "none":
        yield Backend(name, None)
    elif name == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield Backend(name, InMemorySaver())
    elif name == "sqlite":
        with _sqlite(db) as backend:
            yield backend
    elif name == "postgres":
        with _postgres(db) as backend:
            yield backend
    elif name == "mongodb":
        with _mongodb(db) as backend:
            yield backend
    else:
        raise ValueError(f"unsupported backend {name!r}")


def _sqlite_path(db: str) -> str:
    """Accept a plain path or a `sqlite://PATH` / `sqlite:PATH` URL (query string dropped)."""
    for prefix in ("sqlite://", "sqlite:"):
        if db.startswith(prefix):
            return db[len(prefix) :].split("?", 1)[0]
    return db


@contextlib.contextmanager
def _sqlite(db: Optional[str]) -> Iterator[Backend]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    tmpdir = None
    if db is None:
        tmpdir = tempfile.mkdtemp(prefix="sgb_sqlite_")
        path = os.path.join(tmpdir, "bench.sqlite")
    else:
        path = _sqlite_path(db)
    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        saver = SqliteSaver(conn)
        saver.setup()  # also done lazily on first use; explicit so measure() always sees tables

        def measure() -> tuple[int, dict[str, int]]:
            probe = sqlite3.connect(path)
            try:
                probe.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                tables = [
                    r[0]
                    for r in probe.execute(
                        "SELECT name FROM sqlite_master WHERE type='table' ORDER BY name"
                    )
                ]
                rows = {
                    t: probe.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables
                }
            finally:
                probe.close()
            size = os.path.getsize(path)
            if os.path.exists(path + "-wal"):
                size += os.path.getsize(path + "-wal")
            return size, rows

        yield Backend("sqlite", saver, measure)
    finally:
        conn.close()
        if tmpdir is not None:
            shutil.rmtree(tmpdir, ignore_errors=True)


@contextlib.contextmanager
def _postgres(db: Optional[str]) -> Iterator[Backend]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver
    from psycopg import sql
    from psycopg.rows import dict_row

    url = db or os.environ.get("STATEGRAPH_TEST_POSTGRES_URL") or DEFAULT_POSTGRES_URL
    schema = f"sgb_{uuid.uuid4().hex[:16]}"
    with psycopg.Connection.connect(url, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        try:
            conn = psycopg.Connection.connect(
                url,
                autocommit=True,
                prepare_threshold=0,
                row_factory=dict_row,
                options=f"-c search_path={schema}",
            )
            try:
                saver = PostgresSaver(conn)
                saver.setup()

                def measure() -> tuple[int, dict[str, int]]:
                    size = admin.execute(
                        "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) "
                        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                        "WHERE n.nspname = %s AND c.relkind = 'r'",
                        (schema,),
                    ).fetchone()[0]
                    tables = [
                        r[0]
                        for r in admin.execute(
                            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY tablename",
                            (schema,),
                        )
                    ]
                    rows = {
                        t: admin.execute(
                            sql.SQL("SELECT count(*) FROM {}.{}").format(
                                sql.Identifier(schema), sql.Identifier(t)
                            )
                        ).fetchone()[0]
                        for t in tables
                    }
                    return int(size), rows

                yield Backend("postgres", saver, measure)
            finally:
                conn.close()
        finally:
            admin.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


@contextlib.contextmanager
def _mongodb(db: Optional[str]) -> Iterator[Backend]:
    from langgraph.checkpoint.mongodb import MongoDBSaver
    from pymongo import MongoClient

    url = db or os.environ.get("STATEGRAPH_TEST_MONGODB_URL") or DEFAULT_MONGODB_URL
    name = f"sgb_{uuid.uuid4().hex[:16]}"
    client = MongoClient(url)
    try:
        saver = MongoDBSaver(client, db_name=name)
        database = client[name]

        def measure() -> tuple[int, dict[str, int]]:
            size, rows = 0, {}
            for coll in ("checkpoints", "checkpoint_writes"):
                stats = database.command("collStats", coll)
                size += int(stats.get("size", 0)) + int(stats.get("totalIndexSize", 0))
                rows[coll] = int(stats.get("count", 0))
            return size, rows

        yield Backend("mongodb", saver, measure)
    finally:
        client.drop_database(name)
        client.close()
