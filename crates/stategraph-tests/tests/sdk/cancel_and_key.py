"""The SDK against a server with an API key: a wrong key is refused, then `runs.cancel`
(interrupt, waited) and `multitask_strategy="rollback"` on a run held in node `long`.

Usage: python cancel_and_key.py BASE_URL KEY; prints a JSON summary."""

import json
import sys
import time

import httpx
from langgraph_sdk import get_sync_client

base, key = sys.argv[1], sys.argv[2]
out = {}
try:
    get_sync_client(url=base, api_key="wrong").threads.create()
    out["wrong_key"] = None
except httpx.HTTPStatusError as e:
    out["wrong_key"] = [e.response.status_code, e.response.json()]

client = get_sync_client(url=base, api_key=key)


def until_long(thread_id):
    for _ in range(500):
        if client.threads.get_state(thread_id)["next"] == ["long"]:
            return
        time.sleep(0.01)
    raise RuntimeError("the run never reached node `long`")


thread_id = client.threads.create()["thread_id"]
run = client.runs.create(thread_id, "hold", input={"foo": "", "bar": []})
until_long(thread_id)
out["cancel_wait"] = client.runs.cancel(thread_id, run["run_id"], wait=True, action="interrupt")
out["cancelled_run"] = client.runs.get(thread_id, run["run_id"])["status"]
out["thread_status"] = client.threads.get(thread_id)["status"]

run = client.runs.create(thread_id, "hold", input={"foo": "", "bar": ["x"]})
second = client.runs.wait(
    thread_id, "seed", input={"foo": "", "bar": ["s"]}, multitask_strategy="rollback"
)
out["after_rollback"] = second
try:
    client.runs.get(thread_id, run["run_id"])
    out["rolled_back_run"] = None
except httpx.HTTPStatusError as e:
    out["rolled_back_run"] = e.response.status_code
print(json.dumps(out))
