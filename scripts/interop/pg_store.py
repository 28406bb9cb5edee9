"""Python LangGraph's PostgresStore on a scratch schema, for the Rust store interop test.

Usage: python pg_store.py URL SCHEMA ACTION

The connection's search_path is `SCHEMA, public` (pgvector's type lives in public).

ACTION:
- `put`: `setup()` without an index, then puts the items below (one with a TTL, one put
  twice) and prints `{"items": [Item.dict(), ...]}` as `get` reads them back.
- `read`: reads a JSON request from stdin, `{"gets": [[namespace, key], ...], "searches":
  [{"prefix": [...], "query": str|null, "filter": obj|null, "limit": n, "offset": n}, ...]}`,
  runs `setup()` with an index (64 dims, fields ["text"], embedded by the same hashing
  scheme as stategraph's `HashingEmbeddings`), and prints `{"gets": [Item.dict() | null],
  "searches": [[SearchItem.dict(), ...], ...]}` plus the migration versions it found.
"""

import json
import math
import re
import sys
import time

import psycopg
from psycopg.rows import dict_row

from langgraph.store.postgres import PostgresStore

DIMS = 64


def hashing_embed(texts):
    """stategraph's HashingEmbeddings: FNV-1a of each lower-cased word into a signed bucket."""
    out = []
    for text in texts:
        v = [0.0] * DIMS
        for word in re.split(r"[^\w]|_", text):
            if not word:
                continue
            h = 0xCBF29CE484222325
            for b in word.lower().encode():
                h ^= b
                h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
            v[h % DIMS] += 1.0 if (h >> 63) == 0 else -1.0
        norm = math.sqrt(sum(x * x for x in v))
        out.append([x / norm for x in v] if norm > 0 else v)
    return out


PUTS = [
    (("interop", "py", "prefs"), "k1", {"food": "pizza", "n": 3, "deep": {"a": [1, 2.5, None]}}),
    (("interop", "py"), "k2", {"text": "我喜欢披萨 🍕", "ok": True, "big": 9007199254740993}),
    (("interop", "py", "prefs"), "k3", {"kind": "ttl"}),
]


def main():
    url, schema, action = sys.argv[1:4]
    with psycopg.Connection.connect(
        url,
        autocommit=True,
        prepare_threshold=0,
        row_factory=dict_row,
        options=f"-c search_path={schema},public",
    ) as conn:
        if action == "put":
            store = PostgresStore(conn)
            store.setup()
            for ns, key, value in PUTS:
                store.put(ns, key, value, ttl=5 if key == "k3" else None)
                time.sleep(0.01)
            # An update keeps created_at.
            store.put(PUTS[0][0], "k1", {**PUTS[0][2], "n": 4})
            items = [store.get(ns, key, refresh_ttl=False) for ns, key, _ in PUTS]
            print(json.dumps({"items": [i.dict() for i in items]}))
        elif action == "read":
            request = json.load(sys.stdin)
            store = PostgresStore(
                conn,
                index={"dims": DIMS, "embed": hashing_embed, "fields": ["text"]},
            )
            store.setup()
            versions = {}
            for table in ("store_migrations", "vector_migrations"):
                with conn.cursor() as cur:
                    cur.execute(f"SELECT v FROM {table} ORDER BY v")
                    versions[table] = [r["v"] for r in cur.fetchall()]
            gets = []
            for ns, key in request["gets"]:
                item = store.get(tuple(ns), key, refresh_ttl=False)
                gets.append(item.dict() if item else None)
            searches = []
            for s in request["searches"]:
                found = store.search(
                    tuple(s["prefix"]),
                    query=s.get("query"),
                    filter=s.get("filter"),
                    limit=s.get("limit", 10),
                    offset=s.get("offset", 0),
                    refresh_ttl=False,
                )
                searches.append([i.dict() for i in found])
            print(json.dumps({"gets": gets, "searches": searches, "versions": versions}))
        else:
            raise SystemExit(f"unknown action {action}")


if __name__ == "__main__":
    main()
