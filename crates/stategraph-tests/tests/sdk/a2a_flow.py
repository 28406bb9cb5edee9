"""The official A2A Python SDK (`a2a-sdk`) against a server's `/a2a/{assistant_id}` endpoints:
it resolves an assistant's agent card, sends messages (waiting, streaming, and returning at
once then polling), answers an interrupt in the same task, reads and lists tasks, and meets
the errors; then the A2A 0.3 method names over plain HTTP.

Usage: python a2a_flow.py BASE_URL API_KEY; prints a transcript as JSON. The server serves
graphs `echo` (answers `echo: <message>`), `chat` (drafts, then asks before it sends) and
`seed` (no `messages` channel)."""

import asyncio
import json
import sys
import uuid

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

base, key = sys.argv[1:3]


def message(text, context_id=None, task_id=None):
    m = Message(message_id=str(uuid.uuid4()), role=Role.ROLE_USER, parts=[Part(text=text)])
    if context_id:
        m.context_id = context_id
    if task_id:
        m.task_id = task_id
    return SendMessageRequest(message=m)


def task_summary(task):
    return {
        "id": task.id,
        "context_id": task.context_id,
        "state": TaskState.Name(task.status.state),
        "answer": [p.text for a in task.artifacts for p in a.parts if p.HasField("text")],
        "artifacts": [MessageToDict(a) for a in task.artifacts],
        "history": [
            [Role.Name(m.role), "".join(p.text for p in m.parts), m.task_id]
            for m in task.history
        ],
    }


def event_summary(ev):
    kind = ev.WhichOneof("payload")
    if kind == "task":
        return ["task", TaskState.Name(ev.task.status.state)]
    if kind == "status_update":
        text = "".join(p.text for p in ev.status_update.status.message.parts)
        return ["status", TaskState.Name(ev.status_update.status.state), text]
    if kind == "artifact_update":
        a = ev.artifact_update.artifact
        return ["artifact", a.name, [MessageToDict(p) for p in a.parts]]
    return [kind]


async def send_all(client, request):
    return [ev async for ev in client.send_message(request)]


async def error_of(call):
    try:
        await call
        return "answered"
    except Exception as e:  # the SDK raises the JSON-RPC error as its own type
        return f"{type(e).__name__}: {e}"


async def main():
    out = {}
    async with httpx.AsyncClient(
        headers={"x-api-key": key}, timeout=httpx.Timeout(60, read=300)
    ) as http:

        async def assistant_of(graph):
            r = await http.post(f"{base}/assistants/search", json={"graph_id": graph})
            return r.json()[0]["assistant_id"]

        echo_id, approve_id, seed_id = [await assistant_of(g) for g in ("echo", "chat", "seed")]
        out["echo_id"] = echo_id
        card = await A2ACardResolver(http, f"{base}/a2a/{echo_id}").get_agent_card()
        out["card"] = MessageToDict(card)
        factory = lambda **kw: ClientFactory(ClientConfig(httpx_client=http, **kw)).create(card)
        waiting = factory(streaming=False)
        streaming = factory(streaming=True)

        # A message, waited for; then another in the same context (a new task).
        [ev] = await send_all(waiting, message("hello"))
        first = ev.task
        out["send"] = task_summary(first)
        [ev] = await send_all(waiting, message("again", context_id=first.context_id))
        second = ev.task
        out["send_again"] = task_summary(second)

        # The same, streamed.
        events = await send_all(streaming, message("streamed"))
        out["stream"] = [event_summary(e) for e in events]

        # Returned at once, then polled until it ends.
        polling = factory(streaming=False, polling=True)
        [ev] = await send_all(polling, message("later"))
        out["polled_first"] = TaskState.Name(ev.task.status.state)
        task = ev.task
        for _ in range(100):
            task = await waiting.get_task(GetTaskRequest(id=ev.task.id))
            if task.status.state == TaskState.TASK_STATE_COMPLETED:
                break
            await asyncio.sleep(0.1)
        out["polled"] = task_summary(task)

        # Reading a task: its state and the conversation as its run left it (the newest 2).
        got = await waiting.get_task(GetTaskRequest(id=second.id, history_length=2))
        out["get"] = task_summary(got)
        out["get_first"] = task_summary(await waiting.get_task(GetTaskRequest(id=first.id)))
        listed = await waiting.list_tasks(ListTasksRequest(context_id=first.context_id))
        out["list"] = {
            "total": listed.total_size,
            "tasks": [[t.id, TaskState.Name(t.status.state)] for t in listed.tasks],
        }

        # An assistant that asks before it sends: the task awaits input, the answer resumes it.
        approve_card = await A2ACardResolver(http, f"{base}/a2a/{approve_id}").get_agent_card()
        approver = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(
            approve_card
        )
        [ev] = await send_all(approver, message("draft one"))
        asked = ev.task
        out["asked"] = task_summary(asked)
        [ev] = await send_all(
            approver, message("yes", context_id=asked.context_id, task_id=asked.id)
        )
        out["resumed"] = task_summary(ev.task)
        # Streamed, then cancelled while it awaits input.
        stream_approver = ClientFactory(ClientConfig(httpx_client=http, streaming=True)).create(
            approve_card
        )
        events = await send_all(stream_approver, message("draft two"))
        out["asked_stream"] = [event_summary(e) for e in events]
        waiting_task = events[0].task.id
        cancelled = await approver.cancel_task(CancelTaskRequest(id=waiting_task))
        out["cancelled"] = TaskState.Name(cancelled.status.state)
        after = await approver.get_task(GetTaskRequest(id=waiting_task))
        out["after_cancel"] = TaskState.Name(after.status.state)

        # Errors.
        out["errors"] = {
            "cancel_completed": await error_of(waiting.cancel_task(CancelTaskRequest(id=first.id))),
            "unknown_task": await error_of(
                waiting.get_task(GetTaskRequest(id=f"{first.context_id}:{uuid.uuid4()}"))
            ),
            "terminal_task": await error_of(
                send_all(waiting, message("more", context_id=first.context_id, task_id=first.id))
            ),
        }
        seed_card = await A2ACardResolver(http, f"{base}/a2a/{seed_id}").get_agent_card()
        seed = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(seed_card)
        out["errors"]["no_messages"] = await error_of(send_all(seed, message("hi")))

        # A2A 0.3's method names: 0.3's shapes.
        rpc = {
            "jsonrpc": "2.0",
            "id": "legacy-1",
            "method": "message/send",
            "params": {
                "message": {
                    "kind": "message",
                    "messageId": str(uuid.uuid4()),
                    "role": "user",
                    "parts": [{"kind": "text", "text": "old"}],
                }
            },
        }
        r = await http.post(f"{base}/a2a/{echo_id}", json=rpc)
        out["legacy"] = r.json()
        rpc["id"] = 7
        rpc["method"] = "tasks/resubscribe"
        r = await http.post(f"{base}/a2a/{echo_id}", json=rpc)
        out["legacy_unknown"] = r.json()
        r = await http.post(
            f"{base}/a2a/{echo_id}",
            json={**rpc, "method": "message/stream"},
            headers={"accept": "application/json"},
        )
        out["stream_without_accept"] = [r.status_code, r.json()]
    async with httpx.AsyncClient(timeout=30) as http:
        r = await http.get(f"{base}/a2a/{echo_id}/.well-known/agent-card.json")
        out["without_key"] = r.status_code
    print(json.dumps(out))


asyncio.run(main())
