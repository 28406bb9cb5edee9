"""Print what Python LangGraph's SqliteSaver reads from a checkpoint database, as JSON.

Usage: python dump_sqlite.py PATH [--values-json]

Every checkpoint of every thread and namespace (SqliteSaver.list(None), newest first), with
each channel value and pending write re-encoded by Python's own serializer (type tag + hex),
so that a reader in another language can be checked byte for byte. --values-json adds a
human-readable `repr` of each value.
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


def dump(path, with_repr=False):
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
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
                    k: typed(saver.serde, v, with_repr)
                    for k, v in sorted(cp["channel_values"].items())
                },
                "pending_writes": [
                    [task_id, channel, typed(saver.serde, value, with_repr)]
                    for task_id, channel, value in (t.pending_writes or [])
                ],
            }
        )
    conn.close()
    return {"tuples": tuples}


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    json.dump(dump(sys.argv[1], "--values-json" in sys.argv), sys.stdout, ensure_ascii=False)
