"""Print what Python LangGraph's SqliteSaver reads from a checkpoint database, as JSON.

Usage: python dump_sqlite.py PATH [--values-json] [--aes]

Every checkpoint of every thread and namespace (SqliteSaver.list(None), newest first), with
each channel value and pending write re-encoded by Python's own serializer (type tag + hex),
so that a reader in another language can be checked byte for byte. --values-json adds a
human-readable `repr` of each value. --aes reads an encrypted database with LangGraph's
`EncryptedSerializer.from_pycryptodome_aes()` (key from LANGGRAPH_AES_KEY); the values are
still re-encoded in plaintext for comparison.

The file is only read: the saver's setup() (which would switch the file to WAL mode and run
DDL) is skipped.
"""

import json
import sqlite3
import sys

from langgraph.checkpoint.sqlite import SqliteSaver


def typed(serde, value, with_repr):
    tag, data = serde.dumps_typed(value)
    out = {"type": tag, "hex": data.hex()}
    if with_repr:
        out["repr"] = repr(value)
    return out


def config_json(config):
    if config is None:
        return None
    c = config["configurable"]
    return {
        "thread_id": c["thread_id"],
        "checkpoint_ns": c.get("checkpoint_ns", ""),
        "checkpoint_id": c["checkpoint_id"],
    }


def open_saver(path, aes=False):
    """A SqliteSaver that reads PATH without changing it."""
    conn = sqlite3.connect(path, check_same_thread=False)
    serde = None
    if aes:
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        serde = EncryptedSerializer.from_pycryptodome_aes()
    saver = SqliteSaver(conn, serde=serde)
    saver.is_setup = True  # read only: no PRAGMA journal_mode=WAL, no CREATE/ALTER TABLE
    columns = {row[1] for row in conn.execute("PRAGMA table_info(writes)")}
    saver._has_task_path = "task_path" in columns  # what setup() decides for old files
    return saver


def dump(path, with_repr=False, aes=False):
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    saver = open_saver(path, aes)
    plain = JsonPlusSerializer()
    tuples = []
    for t in saver.list(None):
        cp = t.checkpoint
        tuples.append(
            {
                "config": config_json(t.config),
                "parent_config": config_json(t.parent_config),
                "metadata": t.metadata,
                "checkpoint": {
                    "v": cp["v"],
                    "id": cp["id"],
                    "ts": cp["ts"],
                    "channel_versions": cp["channel_versions"],
                    "versions_seen": cp["versions_seen"],
                    "updated_channels": cp.get("updated_channels"),
                },
                "channel_values": {
                    k: typed(plain, v, with_repr)
                    for k, v in sorted(cp["channel_values"].items())
                },
                "pending_writes": [
                    [task_id, channel, typed(plain, value, with_repr)]
                    for task_id, channel, value in (t.pending_writes or [])
                ],
            }
        )
    saver.conn.close()
    return {"tuples": tuples}


if __name__ == "__main__":
    args = sys.argv[1:]
    paths = [a for a in args if a not in ("--values-json", "--aes")]
    if len(paths) != 1:
        sys.exit(__doc__)
    json.dump(
        dump(paths[0], "--values-json" in args, "--aes" in args),
        sys.stdout,
        ensure_ascii=False,
    )
