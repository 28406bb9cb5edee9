"""The platform routes through LangGraph's Python SDK: webhooks (to a receiver this script
runs), background stateless runs (`runs.create(None, ...)`), batches, crons (create, thread
crons, search, count, update, delete, a cron that fires), thread pruning and joining a
thread's stream. Run against a server serving graph `seed` (`foo` last value, `bar`
appended; node_a -> node_b), it prints a transcript of what the server answered, normalized
(no ids or times), to compare with another server's.

Usage: python platform_flow.py BASE_URL; prints the transcript as JSON."""

import json
import re
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
from langgraph_sdk import get_sync_client

base = sys.argv[1]
client = get_sync_client(url=base)
out = {}
INPUT = {"foo": "", "bar": []}

received = []


class Hook(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        received.append({"path": self.path, "body": body})
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args):
        pass


hook = HTTPServer(("127.0.0.1", 0), Hook)
threading.Thread(target=hook.serve_forever, daemon=True).start()
hook_url = f"http://127.0.0.1:{hook.server_port}/hook"


def wait_for(check, what, timeout=30.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise SystemExit(f"timed out waiting for {what}")


UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def status_of(call):
    """The HTTP status and detail (ids left out) of a call that fails, or 'ok'."""
    try:
        call()
        return "ok"
    except httpx.HTTPStatusError as e:
        try:
            detail = e.response.json().get("detail")
        except Exception:
            detail = None
        if isinstance(detail, str):
            detail = UUID.sub("<id>", detail)
        return {"status": e.response.status_code, "detail": detail}


def hook_for(run_id):
    return wait_for(
        lambda: next((r for r in received if r["body"].get("run_id") == run_id), None),
        f"the webhook of run {run_id}",
    )


# 1. A webhook when a waited run on a thread ends.
thread = client.threads.create()
run = client.runs.create(thread["thread_id"], "seed", input=INPUT, webhook=hook_url + "?n=1")
call = hook_for(run["run_id"])
body = call["body"]
out["webhook"] = {
    "path": call["path"],
    "keys": sorted(body),
    "status": body["status"],
    "values": body["values"],
    "thread": body["thread_id"] == thread["thread_id"],
    "webhook": body["kwargs"]["webhook"] == hook_url + "?n=1",
}
out["webhook_bad_url"] = status_of(
    lambda: client.runs.create(thread["thread_id"], "seed", input=INPUT, webhook="ftp://x")
)

# 2. A stateless background run: its temporary thread is gone after it.
run = client.runs.create(None, "seed", input=INPUT, webhook=hook_url)
out["stateless_run"] = {
    "keys": sorted(run),
    "status": run["status"],
    "temporary": run["kwargs"]["temporary"],
}
body = hook_for(run["run_id"])["body"]
out["stateless_webhook"] = {"status": body["status"], "values": body["values"]}
time.sleep(0.5)
out["stateless_thread_after"] = status_of(lambda: client.threads.get(run["thread_id"]))
out["stateless_resume"] = status_of(
    lambda: client.runs.create(None, "seed", command={"resume": "x"})
)

# 3. A batch of stateless runs.
batch = client.runs.create_batch(
    [
        {"assistant_id": "seed", "input": INPUT, "metadata": {"i": 0}, "webhook": hook_url},
        {"assistant_id": "seed", "input": INPUT, "metadata": {"i": 1}, "webhook": hook_url},
    ]
)
out["batch"] = [{"status": r["status"], "i": r["metadata"]["i"]} for r in batch]
out["batch_webhooks"] = sorted(hook_for(r["run_id"])["body"]["status"] for r in batch)
out["batch_unknown_assistant"] = status_of(
    lambda: client.runs.create_batch([{"assistant_id": str(uuid.uuid4()), "input": INPUT}])
)

# 4. Crons: create, thread crons, search, count, update, delete, bad input.
cron = client.crons.create(
    "seed", schedule="*/5 * * * *", input=INPUT, metadata={"k": "v"}, timezone="Europe/Paris"
)
out["cron"] = {
    "keys": sorted(cron),
    "schedule": cron["schedule"],
    "timezone": cron.get("timezone"),
    "enabled": cron["enabled"],
    "on_run_completed": cron.get("on_run_completed"),
    "thread_id": cron["thread_id"],
    "metadata": cron["metadata"],
    "payload": sorted(cron["payload"]),
    "payload_cron_id": cron["payload"]["config"]["configurable"]["cron_id"] == cron["cron_id"],
    "next_run_date": cron["next_run_date"] is not None,
}
assistant_id = cron["assistant_id"]
thread = client.threads.create()
tcron = client.crons.create_for_thread(
    thread["thread_id"], "seed", schedule="0 12 * * *", input=INPUT
)
out["thread_cron"] = {
    "thread": tcron["thread_id"] == thread["thread_id"],
    "on_run_completed": tcron.get("on_run_completed"),
}
found = client.crons.search(assistant_id=assistant_id)
out["cron_search"] = len([c for c in found if c["cron_id"] in (cron["cron_id"], tcron["cron_id"])])
out["cron_search_thread"] = [
    c["cron_id"] == tcron["cron_id"] for c in client.crons.search(thread_id=thread["thread_id"])
]
out["cron_search_select"] = [
    sorted(c) for c in client.crons.search(thread_id=thread["thread_id"], select=["cron_id", "schedule"])
]
out["cron_count"] = client.crons.count(assistant_id=assistant_id) >= 2
out["cron_count_thread"] = client.crons.count(thread_id=thread["thread_id"])
updated = client.crons.update(cron["cron_id"], schedule="0 * * * *", enabled=False)
out["cron_updated"] = {
    "schedule": updated["schedule"],
    "enabled": updated["enabled"],
    "metadata": updated["metadata"],
}
out["cron_search_disabled"] = [
    c["cron_id"] == cron["cron_id"] for c in client.crons.search(assistant_id=assistant_id, enabled=False)
]
client.crons.delete(cron["cron_id"])
out["cron_deleted_delete_again"] = status_of(lambda: client.crons.delete(cron["cron_id"]))
out["cron_bad_schedule"] = status_of(lambda: client.crons.create("seed", schedule="nope"))
out["cron_bad_timezone"] = status_of(
    lambda: client.crons.create("seed", schedule="* * * * *", timezone="Mars/Base")
)
out["cron_bad_thread"] = status_of(
    lambda: client.crons.create_for_thread(str(uuid.uuid4()), "seed", schedule="* * * * *")
)
# Deleting the thread deletes its crons.
client.threads.delete(thread["thread_id"])
out["cron_after_thread_deleted"] = client.crons.count(thread_id=thread["thread_id"])

# 5. A cron that fires: every second, on a thread.
thread = client.threads.create()
fast = client.crons.create_for_thread(
    thread["thread_id"], "seed", schedule="* * * * * *", input=INPUT, metadata={"from": "cron"}
)
first = wait_for(
    lambda: [r for r in client.runs.list(thread["thread_id"]) if r["status"] == "success"],
    "a run of the every-second cron",
)[-1]
client.crons.delete(fast["cron_id"])
out["cron_run"] = {
    "metadata_from": first["metadata"].get("from"),
    "cron_id": first["kwargs"]["config"]["configurable"].get("cron_id") == fast["cron_id"],
    "values": client.threads.get_state(thread["thread_id"])["values"]["foo"],
}

# 6. Pruning threads.
a = client.threads.create()
b = client.threads.create()
client.runs.wait(a["thread_id"], "seed", input=INPUT)
out["prune"] = client.threads.prune([a["thread_id"], b["thread_id"], str(uuid.uuid4())])
out["prune_after"] = status_of(lambda: client.threads.get(a["thread_id"]))
out["prune_empty"] = client.threads.prune([])
out["prune_bad_strategy"] = status_of(lambda: client.threads.prune([a["thread_id"]], strategy="x"))
c = client.threads.create()
client.runs.wait(c["thread_id"], "seed", input=INPUT)
client.runs.wait(c["thread_id"], "seed", input=INPUT)
kept = status_of(lambda: client.threads.prune([c["thread_id"]], strategy="keep_latest"))
out["prune_keep_latest"] = kept
if kept == "ok":
    out["prune_keep_latest_history"] = len(client.threads.get_history(c["thread_id"]))
    out["prune_keep_latest_values"] = client.threads.get_state(c["thread_id"])["values"]

# 7. Joining a thread's stream: the events of a run started after joining.
thread = client.threads.create()
events = []
joined = threading.Event()


def follow():
    with httpx.Client(base_url=base, timeout=30) as http:
        with http.stream(
            "GET", f"/threads/{thread['thread_id']}/stream", params={"stream_mode": "run_modes"}
        ) as r:
            event = None
            joined.set()
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line[7:]
                elif line.startswith("data: ") and event:
                    data = json.loads(line[6:])
                    events.append({"event": event, "data": data})
                    if event == "metadata" and data.get("status") == "run_done":
                        return


follower = threading.Thread(target=follow, daemon=True)
follower.start()
joined.wait(10)
time.sleep(0.5)
run = client.runs.create(thread["thread_id"], "seed", input=INPUT, stream_mode=["values", "updates"])
follower.join(30)


def norm(e):
    d = e["data"]
    if e["event"] == "metadata":
        return {"event": "metadata", "keys": sorted(d), "status": d.get("status")}
    return e


out["thread_stream"] = [norm(e) for e in events]
out["thread_stream_bad_mode"] = status_of(
    lambda: httpx.get(
        f"{base}/threads/{thread['thread_id']}/stream", params={"stream_modes": "nope"}
    ).raise_for_status()
)

print(json.dumps(out))
hook.shutdown()
