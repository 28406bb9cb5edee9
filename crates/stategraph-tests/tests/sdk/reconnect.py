"""The SDK reconnecting to a run's stream, cancelling runs in bulk and deleting an assistant
with its threads.

A resumable background run of `steps` (five slow nodes) is joined with `join_stream`, the
connection is dropped after a few events, and a second `join_stream` resumes after the last
event id seen; the two parts must make up the run's whole stream, which a third join
(`last_event_id="-1"`) replays once the run has ended. Then `runs.cancel_many` (by ids, then
by status) on runs held in node `long`, and `assistants.delete(delete_threads=True)`.

Usage: python reconnect.py BASE_URL; prints a JSON summary."""

import json
import sys
import time

import httpx
from langgraph_sdk import get_sync_client

base = sys.argv[1]
client = get_sync_client(url=base)
out = {}


def parts(stream):
    return [{"event": p.event, "data": p.data, "id": p.id} for p in stream]


# 1. Reconnecting with the last event id.
thread_id = client.threads.create()["thread_id"]
run = client.runs.create(
    thread_id,
    "steps",
    input={"foo": "", "bar": []},
    stream_mode=["values", "updates"],
    stream_resumable=True,
)
run_id = run["run_id"]
first_stream = client.runs.join_stream(thread_id, run_id, last_event_id="-1")
first = []
for part in first_stream:
    first.append({"event": part.event, "data": part.data, "id": part.id})
    if len(first) == 4:
        break
first_stream.close()  # drops the connection mid-run
out["running_at_drop"] = client.runs.get(thread_id, run_id)["status"]
rest = parts(client.runs.join_stream(thread_id, run_id, last_event_id=first[-1]["id"]))
out["status_after"] = client.runs.get(thread_id, run_id)["status"]
full = parts(client.runs.join_stream(thread_id, run_id, last_event_id="-1"))
joined = first + rest
ids = [p["id"] for p in joined]
out["first_len"] = len(first)
out["rest_len"] = len(rest)
out["full_events"] = [p["event"] for p in full]
out["joined_equals_full"] = joined == full
out["ids_unique"] = len(set(ids)) == len(ids) and all(ids)
out["final_values"] = full[-1]["data"]
out["metadata_run_id"] = full[0]["data"]["run_id"] == run_id
# Filtered by mode, from the start.
out["updates_only"] = [
    list(p["data"])
    for p in parts(
        client.runs.join_stream(thread_id, run_id, stream_mode="updates", last_event_id="-1")
    )
]
# Without an id, after the run: nothing more.
out["after_end_no_id"] = parts(client.runs.join_stream(thread_id, run_id))


# 2. Bulk cancel.
def until_long(tid):
    for _ in range(500):
        if client.threads.get_state(tid)["next"] == ["long"]:
            return
        time.sleep(0.01)
    raise RuntimeError("the run never reached node `long`")


t1 = client.threads.create()["thread_id"]
t2 = client.threads.create()["thread_id"]
r1 = client.runs.create(t1, "hold", input={"foo": "", "bar": []})["run_id"]
r2 = client.runs.create(t2, "hold", input={"foo": "", "bar": []})["run_id"]
until_long(t1)
until_long(t2)
client.runs.cancel_many(thread_id=t1, run_ids=[r1])
out["cancel_by_id"] = [client.runs.get(t1, r1)["status"], client.runs.get(t2, r2)["status"]]
client.runs.cancel_many(status="all")
out["cancel_all"] = client.runs.get(t2, r2)["status"]
try:
    client.runs.cancel_many(status="running")
    out["cancel_none"] = None
except httpx.HTTPStatusError as e:
    out["cancel_none"] = [e.response.status_code, e.response.json()]

# 3. Deleting an assistant with its threads.
assistant = client.assistants.create("seed", name="doomed")
aid = assistant["assistant_id"]
mine = client.threads.create()["thread_id"]
kept = client.threads.create()["thread_id"]
client.runs.wait(mine, aid, input={"foo": "", "bar": []})
client.runs.wait(kept, "seed", input={"foo": "", "bar": []})
client.assistants.delete(aid, delete_threads=True)
out["threads_after_delete"] = []
for tid in (mine, kept):
    try:
        client.threads.get(tid)
        out["threads_after_delete"].append(200)
    except httpx.HTTPStatusError as e:
        out["threads_after_delete"].append(e.response.status_code)
print(json.dumps(out))
