"""A2A over plain JSON-RPC (no SDK), to compare a server's wire answers with the reference
server's: the `chat` assistant's agent card, a message that stops on an interrupt, the task
read back, the answer that resumes it, the context's tasks, A2A 0.3's names (a message, its
stream, a cancel), A2A 1.0's stream, and the protocol's errors.

Ids are replaced by placeholders (`<id-1>`, …) in the order they first appear, timestamps by
`<timestamp>` and the server's address by `BASE`, so two servers' transcripts compare equal when their answers have
the same shape and the same content.

Usage: python a2a_raw.py BASE_URL; prints the transcript as JSON."""

import json
import sys
import uuid

import httpx

base = sys.argv[1]
http = httpx.Client(timeout=httpx.Timeout(60, read=300))
aid = http.post(f"{base}/assistants/search", json={"graph_id": "chat"}).json()[0]["assistant_id"]
url = f"{base}/a2a/{aid}"

NOBODY = "00000000-0000-4000-8000-000000000000"
PLACEHOLDER_KEYS = {"id", "contextId", "taskId", "messageId", "artifactId"}
seen = {}


def scrub(v, key=None):
    """Ids and times as placeholders numbered by first appearance; the server's URL as BASE."""
    if isinstance(v, dict):
        return {k: scrub(x, k) for k, x in v.items()}
    if isinstance(v, list):
        return [scrub(x) for x in v]
    if isinstance(v, str):
        if key == "timestamp":
            return "<timestamp>"
        if key in PLACEHOLDER_KEYS and not v.startswith("ai-"):
            # A task id is "<context>:<run>": each half on its own.
            return ":".join(
                seen.setdefault(part, f"<{key}-{len(seen) + 1}>") for part in v.split(":")
            )
        return v.replace(base, "BASE").replace(aid, "<assistant>")
    return v


def rpc(method, params, *, id="1", accept=None):
    headers = {"accept": accept} if accept else {}
    body = {"jsonrpc": "2.0", "id": id, "method": method, "params": params}
    r = http.post(url, json=body, headers=headers)
    return r.json()


def stream(method, params):
    body = {"jsonrpc": "2.0", "id": "s", "method": method, "params": params}
    events = []
    with http.stream("POST", url, json=body, headers={"accept": "text/event-stream"}) as r:
        for line in r.iter_lines():
            if line.startswith("data:"):
                events.append(json.loads(line[5:]))
    return events


def message(text, v1=True, **extra):
    m = {"messageId": str(uuid.uuid4()), "parts": [{"text": text}], **extra}
    if v1:
        m["role"] = "ROLE_USER"
    else:
        m["role"] = "user"
        m["kind"] = "message"
        m["parts"] = [{"kind": "text", "text": text}]
    return {"message": m}


out = {}
card = http.get(url).json()
card.pop("version", None)
# The graphs' own input schemas differ (the reference's `chat` state requires `messages`).
card["skills"][0]["metadata"]["inputSchema"].pop("required", None)
out["card"] = card
out["card_well_known"] = http.get(f"{url}/.well-known/agent-card.json").json() == http.get(url).json()
out["card_unknown"] = [
    r.status_code
    for r in [http.get(f"{base}/a2a/{uuid.uuid4()}"), http.get(f"{base}/.well-known/agent-card.json")]
]

asked = rpc("SendMessage", message("draft"))
out["asked"] = asked
task = asked["result"]["task"]
out["get"] = rpc("GetTask", {"id": task["id"]})
out["get_short"] = rpc("GetTask", {"id": task["id"], "historyLength": 1})
out["resumed"] = rpc("SendMessage", message("yes", taskId=task["id"], contextId=task["contextId"]))
out["after_resume"] = rpc("GetTask", {"id": task["id"], "historyLength": 0})
out["list"] = rpc("ListTasks", {"contextId": task["contextId"]})
out["again_terminal"] = rpc("SendMessage", message("more", taskId=task["id"], contextId=task["contextId"]))

legacy = rpc("message/send", message("old", v1=False))
out["legacy"] = legacy
legacy_task = legacy["result"]
out["legacy_cancel"] = rpc("tasks/cancel", {"id": legacy_task["id"]})
out["legacy_after_cancel"] = rpc("tasks/get", {"id": legacy_task["id"], "historyLength": 0})
out["legacy_stream"] = stream("message/stream", message("flowing", v1=False))
out["v1_stream"] = stream("SendStreamingMessage", message("flowing"))

out["errors"] = {
    "parse": http.post(url, content=b"{not json").json(),
    "not_object": http.post(url, json=[1]).json(),
    "version": http.post(url, json={"jsonrpc": "1.0", "id": 1, "method": "GetTask"}).json(),
    "id_type": http.post(url, json={"jsonrpc": "2.0", "id": {}, "method": "GetTask"}).json(),
    "method_type": http.post(url, json={"jsonrpc": "2.0", "id": 2, "method": 5}).json(),
    "unknown_method": rpc("tasks/pushNotificationConfig/set", {}),
    "no_message": rpc("SendMessage", {"message": "hi"}),
    "no_message_id": rpc("SendMessage", {"message": {"role": "ROLE_USER", "parts": []}}),
    "no_role": rpc("SendMessage", {"message": {"messageId": "m", "parts": []}}),
    "no_parts": rpc("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}}),
    "part_kinds": rpc(
        "SendMessage",
        {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a", "data": {}}]}},
    ),
    "history_length": rpc("SendMessage", {**message("x"), "configuration": {"historyLength": 11}}),
    "task_not_found": rpc("GetTask", {"id": f"{NOBODY}:{NOBODY}"}),
    "task_id_missing": rpc("GetTask", {}),
    "cancel_terminal": rpc("CancelTask", {"id": task["id"]}),
    "list_page_size": rpc("ListTasks", {"pageSize": 0}),
    "list_status": rpc("ListTasks", {"status": "sleeping"}),
    "assistant_not_uuid": http.post(
        f"{base}/a2a/chat", json={"jsonrpc": "2.0", "id": 3, "method": "GetTask", "params": {"id": "x"}}
    ).json(),
    "unknown_assistant": http.post(
        f"{base}/a2a/{NOBODY}",
        json={"jsonrpc": "2.0", "id": 4, "method": "SendMessage", "params": message("x")},
    ).json(),
}
r = http.post(url, json={"jsonrpc": "2.0", "id": 5, "method": "GetTask"}, headers={"accept": "text/html"})
out["errors"]["accept"] = [r.status_code, r.json()]
r = http.post(url, json={"jsonrpc": "2.0", "id": 6, "result": {}})
out["errors"]["response"] = r.status_code

print(json.dumps(scrub(out)))
