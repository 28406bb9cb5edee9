#!/usr/bin/env python3
"""Agent Server compatibility scenario.

Drives an Agent Server (the Python reference `langgraph dev`, or stategraph's) through the pinned
`langgraph_sdk` sync client and prints one JSON document: a normalized transcript of what the
server answered. Ids, run ids, checkpoint ids and timestamps are replaced by placeholders so that
the transcripts of two servers can be diffed:

    python scenario.py --url http://127.0.0.1:8123 > a.json
    python scenario.py --url http://127.0.0.1:2024 > b.json
    diff a.json b.json

Placeholders: each distinct UUID is named after the role it first appeared in (`<thread_1>`,
`<run_stream>`, ...) or, failing that, `<uuid_N>` in order of first appearance; ISO timestamps
become `<timestamp>`, interrupt ids `<interrupt_N>`. The seed assistant's id is kept literally (it is derived from the graph id,
so two compatible servers must agree on it).

Needs the graphs of bench/agent-server/reference/graphs.py (`seed`, `chat`, `fanout`, `slow`, `nested`). Runs with any Python that has
langgraph-sdk (tested with 0.4.14: the interop venv and the reference-server venv).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
import uuid
from typing import Any

import langgraph_sdk
from langgraph_sdk import get_sync_client

UUID_RE = re.compile(
    r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
)
# LangGraph's interrupt ids (xxh3-128 of the task's namespace, so they change with every
# checkpoint id).
INTERRUPT_ID_RE = re.compile(r"^[0-9a-f]{32}$")
TS_RE = re.compile(
    r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$"
)

GRAPH_ID = "seed"
NAMESPACE_GRAPH = uuid.UUID("6ba7b821-9dad-11d1-80b4-00c04fd430c8")
# Keys whose values vary per request and are not ids or ISO timestamps.
VOLATILE_KEYS = {"__request_start_time_ms__"}
SEED_INPUT = {"foo": "", "bar": []}


class Normalizer:
    """Replaces UUIDs and timestamps with stable placeholders."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.names: dict[str, str] = {}
        self.keep: set[str] = set()
        self.counter = 0
        self.interrupts = 0

    def name(self, value: str | None, role: str) -> None:
        if value and value not in self.names and value not in self.keep:
            self.names[value] = f"<{role}>"

    def keep_literal(self, value: str | None) -> None:
        if value:
            self.keep.add(value)

    def _uuid(self, m: re.Match[str]) -> str:
        v = m.group(0)
        if v in self.keep:
            return v
        if v not in self.names:
            self.counter += 1
            self.names[v] = f"<uuid_{self.counter}>"
        return self.names[v]

    def __call__(self, obj: Any) -> Any:
        if isinstance(obj, dict):
            # Sorted traversal: placeholder numbering must not depend on a server's key order.
            return {
                self(k) if isinstance(k, str) else k: ("<volatile>" if k in VOLATILE_KEYS else self(v))
                for k, v in sorted(obj.items())
            }
        if isinstance(obj, (list, tuple)):
            return [self(v) for v in obj]
        if isinstance(obj, str):
            if TS_RE.match(obj):
                return "<timestamp>"
            if INTERRUPT_ID_RE.match(obj):
                if obj not in self.names:
                    self.interrupts += 1
                    self.names[obj] = f"<interrupt_{self.interrupts}>"
                return self.names[obj]
            obj = obj.replace(self.url, "<server_url>")
            return UUID_RE.sub(self._uuid, obj)
        return obj


def fields(obj: Any) -> list[str] | None:
    return sorted(obj.keys()) if isinstance(obj, dict) else None


def error_info(exc: Exception) -> dict[str, Any]:
    """What an SDK call's HTTP error carried: exception class, status code, JSON body."""
    resp = getattr(exc, "response", None)
    try:
        body = resp.json() if resp is not None else None
    except Exception:
        body = resp.text if resp is not None else None
    return {
        "exception": type(exc).__name__,
        "status_code": getattr(resp, "status_code", None),
        "body_fields": fields(body),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--url", required=True, help="Agent Server base URL, e.g. http://127.0.0.1:8123")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args()

    client = get_sync_client(url=args.url, api_key=None, timeout=args.timeout)
    norm = Normalizer(args.url)
    t: dict[str, Any] = {
        "sdk": {"langgraph_sdk": getattr(langgraph_sdk, "__version__", None)},
        "placeholders": "UUIDs -> <role> / <uuid_N> (first appearance), ISO timestamps -> <timestamp>, interrupt ids -> <interrupt_N>",
    }
    steps: dict[str, Any] = {}

    # 1. assistants.search: the graph's system assistant.
    assistants = client.assistants.search(graph_id=GRAPH_ID, limit=10)
    seed = next(a for a in assistants if a.get("graph_id") == GRAPH_ID)
    assistant_id = seed["assistant_id"]
    norm.keep_literal(assistant_id)
    # langgraph_api/graph.py: assistant_id = uuid5(NAMESPACE_GRAPH, graph_id) with
    # NAMESPACE_GRAPH = 6ba7b821-9dad-11d1-80b4-00c04fd430c8 (NOT uuid.NAMESPACE_URL, ...b811...).
    expected_uuid5 = str(uuid.uuid5(NAMESPACE_GRAPH, GRAPH_ID))
    steps["assistants.search"] = {
        "count": len(assistants),
        "seed_assistant_id": assistant_id,
        "seed_assistant_id_is_uuid5_namespace_graph_of_graph_id": assistant_id == expected_uuid5,
        "graph_id": seed.get("graph_id"),
        "fields": fields(seed),
        "object": seed,
    }

    # 2. threads.create with metadata. `scenario_run` (random per invocation) keeps the metadata
    # search of step 10 independent of threads left on the server by earlier invocations.
    nonce = str(uuid.uuid4())
    norm.name(nonce, "scenario_run")
    owner = {"owner": "scenario", "scenario_run": nonce}
    thread = client.threads.create(metadata=owner)
    thread_id = thread["thread_id"]
    norm.name(thread_id, "thread_1")
    steps["threads.create"] = {
        "fields": fields(thread),
        "status": thread.get("status"),
        "metadata": thread.get("metadata"),
        "object": thread,
    }

    # 3. runs.wait on the thread.
    out = client.runs.wait(thread_id, assistant_id, input=SEED_INPUT)
    steps["runs.wait"] = {"output": out}

    # 4. threads.get after the run.
    thread_after = client.threads.get(thread_id)
    steps["threads.get"] = {
        "fields": fields(thread_after),
        "status": thread_after.get("status"),
        "values": thread_after.get("values"),
        "object": thread_after,
    }

    # 5. threads.get_state.
    state = client.threads.get_state(thread_id)
    meta = state.get("metadata") or {}
    cfg = (state.get("checkpoint") or {}) if isinstance(state.get("checkpoint"), dict) else {}
    norm.name(cfg.get("checkpoint_id"), "checkpoint_latest")
    norm.name(meta.get("run_id"), "run_wait")
    steps["threads.get_state"] = {
        "fields": fields(state),
        "values": state.get("values"),
        "next": state.get("next"),
        "metadata.source": meta.get("source"),
        "metadata.step": meta.get("step"),
        "metadata_fields": fields(meta),
        "checkpoint_fields": fields(state.get("checkpoint")),
        "parent_checkpoint_fields": fields(state.get("parent_checkpoint")),
        "object": state,
    }

    # 6. threads.get_history (newest first).
    history = client.threads.get_history(thread_id, limit=20)
    steps["threads.get_history"] = {
        "count": len(history),
        "items": [
            {
                "step": (h.get("metadata") or {}).get("step"),
                "source": (h.get("metadata") or {}).get("source"),
                "next": h.get("next"),
                "values": h.get("values"),
            }
            for h in history
        ],
        "item_fields": fields(history[0]) if history else None,
    }

    # 7. runs.stream with values+updates on a second thread.
    thread2 = client.threads.create(metadata={**owner, "n": 2})
    thread2_id = thread2["thread_id"]
    norm.name(thread2_id, "thread_2")
    created: list[Any] = []
    events = []
    for part in client.runs.stream(
        thread2_id,
        assistant_id,
        input=SEED_INPUT,
        stream_mode=["values", "updates"],
        on_run_created=created.append,
    ):
        if part.event == "metadata" and isinstance(part.data, dict):
            norm.name(part.data.get("run_id"), "run_stream")
        events.append({"event": part.event, "data": part.data, "id": getattr(part, "id", None)})
    steps["runs.stream"] = {
        "events": events,
        "event_names": [e["event"] for e in events],
        "on_run_created": created,
    }

    # 8. runs.create (background) + runs.join + runs.get.
    run = client.runs.create(thread2_id, assistant_id, input=SEED_INPUT, metadata={"kind": "background"})
    run_id = run["run_id"]
    norm.name(run_id, "run_background")
    # Racy by nature (the run may already have finished): usually "busy" on the reference server.
    busy = client.threads.get(thread2_id).get("status")
    joined = client.runs.join(thread2_id, run_id)
    got = client.runs.get(thread2_id, run_id)
    steps["runs.create"] = {
        "fields": fields(run),
        "status": run.get("status"),
        "thread_status_right_after_create_racy": busy,
        "object": run,
    }
    steps["runs.join"] = {"output": joined}
    steps["runs.get"] = {"fields": fields(got), "status": got.get("status"), "object": got}

    # 9. runs.list on thread 2 (stream run + background run).
    runs = client.runs.list(thread2_id)
    steps["runs.list"] = {
        "count": len(runs),
        "items": [{"run_id": r.get("run_id"), "status": r.get("status")} for r in runs],
    }

    # 10. threads.search by metadata.
    found = client.threads.search(metadata=owner, limit=10)
    found2 = client.threads.search(metadata={**owner, "n": 2}, limit=10)
    steps["threads.search"] = {
        "owner=scenario,scenario_run": {
            "count": len(found),
            "thread_ids": [f["thread_id"] for f in found],
            "statuses": [f.get("status") for f in found],
        },
        "owner=scenario,scenario_run,n=2": {"count": len(found2), "thread_ids": [f["thread_id"] for f in found2]},
    }

    # 11. 404 for an unknown thread.
    missing = str(uuid.uuid4())
    norm.name(missing, "missing_thread")
    try:
        client.threads.get(missing)
        steps["threads.get.404"] = {"status_code": None, "note": "no error raised"}
    except Exception as exc:  # langgraph_sdk.errors.NotFoundError / httpx.HTTPStatusError
        resp = getattr(exc, "response", None)
        try:
            body = resp.json() if resp is not None else None
        except Exception:
            body = resp.text if resp is not None else None
        steps["threads.get.404"] = {
            "exception": type(exc).__name__,
            "status_code": getattr(resp, "status_code", None),
            "content_type": resp.headers.get("content-type") if resp is not None else None,
            "body_fields": fields(body),
            "body": body,
        }

    # 12. stateless runs.wait.
    stateless = client.runs.wait(None, assistant_id, input=SEED_INPUT)
    steps["runs.wait.stateless"] = {"output": stateless}


    # 13. A chat graph with an interrupt: the first run stops at `approve`; the thread is
    # `interrupted` until a run answers with `command.resume`, streamed.
    chat_thread = client.threads.create(metadata={**owner, "graph": "chat"})
    chat_id = chat_thread["thread_id"]
    norm.name(chat_id, "thread_chat")
    asked = client.runs.wait(
        chat_id, "chat", input={"messages": [{"role": "user", "content": "hi", "id": "u-1"}]}
    )
    waiting = client.threads.get(chat_id)
    pending = client.threads.get_state(chat_id)
    resumed = []
    for part in client.runs.stream(
        chat_id, "chat", command={"resume": "yes"}, stream_mode=["values", "updates"]
    ):
        if part.event == "metadata" and isinstance(part.data, dict):
            norm.name(part.data.get("run_id"), "run_chat_resume")
        resumed.append({"event": part.event, "data": part.data})
    final = client.threads.get_state(chat_id)
    steps["chat.interrupt"] = {
        "wait_output": asked,
        "thread_status": waiting.get("status"),
        "thread_interrupts": waiting.get("interrupts"),
        "state_next": pending.get("next"),
        "state_tasks": pending.get("tasks"),
        "state_interrupts": pending.get("interrupts"),
    }
    steps["chat.resume_stream"] = {
        "events": resumed,
        "final_values": final.get("values"),
        "final_next": final.get("next"),
        "thread_status": client.threads.get(chat_id).get("status"),
    }

    # 14. Send fan-out: one worker task per item.
    fan_thread = client.threads.create(metadata={**owner, "graph": "fanout"})
    fan_id = fan_thread["thread_id"]
    norm.name(fan_id, "thread_fanout")
    fanned = client.runs.wait(fan_id, "fanout", input={"items": [1, 2, 3], "done": []})
    fan_history = client.threads.get_history(fan_id)
    steps["fanout"] = {
        "output": fanned,
        "history": [
            {
                "step": (h.get("metadata") or {}).get("step"),
                "source": (h.get("metadata") or {}).get("source"),
                "next": h.get("next"),
                "task_names": [t.get("name") for t in h.get("tasks") or []],
                "values": h.get("values"),
            }
            for h in fan_history
        ],
    }

    # 15. update_state as a node, continue, then replay from a past checkpoint.
    upd_thread = client.threads.create(metadata={**owner, "graph": "seed-update"})
    upd_id = upd_thread["thread_id"]
    norm.name(upd_id, "thread_update")
    client.runs.wait(upd_id, assistant_id, input=SEED_INPUT, interrupt_before=["node_b"])
    stopped = client.threads.get_state(upd_id)
    updated = client.threads.update_state(upd_id, {"foo": "edited"}, as_node="node_a")
    after_update = client.threads.get_state(upd_id)
    continued = client.runs.wait(upd_id, assistant_id, input=None)
    history = client.threads.get_history(upd_id)
    before_b = next(
        h for h in history if h.get("next") == ["node_b"] and (h.get("metadata") or {}).get("source") == "loop"
    )
    replayed = client.runs.wait(
        upd_id, assistant_id, input=None, checkpoint_id=before_b["checkpoint"]["checkpoint_id"]
    )
    steps["update_state"] = {
        "stopped_next": stopped.get("next"),
        "update_fields": fields(updated),
        "update_checkpoint_fields": fields(updated.get("checkpoint")),
        "after_update_values": after_update.get("values"),
        "after_update_next": after_update.get("next"),
        "after_update_source": (after_update.get("metadata") or {}).get("source"),
        "continued_output": continued,
        "replayed_output": replayed,
        "history": [
            {
                "step": (h.get("metadata") or {}).get("step"),
                "source": (h.get("metadata") or {}).get("source"),
                "next": h.get("next"),
                "values": h.get("values"),
            }
            for h in client.threads.get_history(upd_id)
        ],
    }

    # 16. Multitask strategies on a busy thread (`slow` takes 1 s).
    mt_thread = client.threads.create(metadata={**owner, "graph": "slow"})
    mt_id = mt_thread["thread_id"]
    norm.name(mt_id, "thread_multitask")
    first = client.runs.create(mt_id, "slow", input=SEED_INPUT)
    norm.name(first["run_id"], "run_mt_first")
    try:
        client.runs.create(mt_id, "slow", input=SEED_INPUT, multitask_strategy="reject")
        rejected: Any = {"note": "no error raised"}
    except Exception as exc:
        rejected = error_info(exc)
    queued = client.runs.create(mt_id, "slow", input=SEED_INPUT, multitask_strategy="enqueue")
    norm.name(queued["run_id"], "run_mt_enqueued")
    queued_status = queued.get("status")
    client.runs.join(mt_id, queued["run_id"])
    enqueue = {
        "first": client.runs.get(mt_id, first["run_id"]).get("status"),
        "enqueued_at_create": queued_status,
        "enqueued": client.runs.get(mt_id, queued["run_id"]).get("status"),
    }
    victim = client.runs.create(mt_id, "slow", input=SEED_INPUT)
    norm.name(victim["run_id"], "run_mt_interrupted")
    interrupter = client.runs.create(mt_id, "slow", input=SEED_INPUT, multitask_strategy="interrupt")
    norm.name(interrupter["run_id"], "run_mt_interrupter")
    client.runs.join(mt_id, interrupter["run_id"])
    interrupted = {
        "victim": client.runs.get(mt_id, victim["run_id"]).get("status"),
        "interrupter": client.runs.get(mt_id, interrupter["run_id"]).get("status"),
    }
    doomed = client.runs.create(mt_id, "slow", input=SEED_INPUT)
    norm.name(doomed["run_id"], "run_mt_rolled_back")
    roller = client.runs.create(mt_id, "slow", input=SEED_INPUT, multitask_strategy="rollback")
    norm.name(roller["run_id"], "run_mt_roller")
    client.runs.join(mt_id, roller["run_id"])
    try:
        gone: Any = client.runs.get(mt_id, doomed["run_id"]).get("status")
    except Exception as exc:
        gone = error_info(exc)
    steps["multitask"] = {
        "reject": rejected,
        "enqueue": enqueue,
        "interrupt": interrupted,
        "rollback": {
            "rolled_back_run": gone,
            "roller": client.runs.get(mt_id, roller["run_id"]).get("status"),
        },
        "final_values": client.threads.get_state(mt_id).get("values"),
        "runs": sorted(r.get("status") for r in client.runs.list(mt_id)),
    }

    # 17. Cancel a running run (interrupt, the default action).
    cancel_thread = client.threads.create(metadata={**owner, "graph": "slow-cancel"})
    cancel_id = cancel_thread["thread_id"]
    norm.name(cancel_id, "thread_cancel")
    to_cancel = client.runs.create(cancel_id, "slow", input=SEED_INPUT)
    norm.name(to_cancel["run_id"], "run_cancelled")
    # Cancel once the run is inside `wait` (its input checkpointed, `wait` next): cancelled any
    # earlier, whether the input was checkpointed yet is a race, and the thread's status and
    # the values the cancel returns depend on it.
    deadline = time.monotonic() + 10.0
    while client.threads.get_state(cancel_id).get("next") != ["wait"]:
        if time.monotonic() > deadline:
            raise SystemExit("scenario: the run to cancel never reached its `wait` node")
        time.sleep(0.02)
    cancelled = client.runs.cancel(cancel_id, to_cancel["run_id"], wait=True)
    steps["cancel"] = {
        "response": cancelled,
        "run_status": client.runs.get(cancel_id, to_cancel["run_id"]).get("status"),
        "thread_status": client.threads.get(cancel_id).get("status"),
    }

    # 18. The store: put, get, search with a filter, namespaces, delete.
    ns = ["scenario", nonce]
    client.store.put_item(ns, "k1", {"text": "apples", "n": 1})
    client.store.put_item(ns, "k2", {"text": "pears", "n": 2})
    item = client.store.get_item(ns, "k1")
    found_items = client.store.search_items(ns, filter={"text": "apples"}, limit=10)
    all_items = client.store.search_items(ns, limit=10, offset=0)
    spaces = client.store.list_namespaces(prefix=["scenario", nonce])
    client.store.delete_item(ns, "k1")
    try:
        after_delete: Any = client.store.get_item(ns, "k1")
    except Exception as exc:
        after_delete = error_info(exc)
    steps["store"] = {
        "get": item,
        "get_fields": fields(item),
        "search_filter": found_items,
        "search_all_keys": sorted(i.get("key") for i in all_items.get("items", [])),
        # The order of results without a query is the store's: insertion order in the
        # reference's in-memory store, newest first in LangGraph's SQL stores.
        "search_all_keys_in_server_order": [i.get("key") for i in all_items.get("items", [])],
        "namespaces": spaces,
        "after_delete": after_delete,
    }

    # 19. A subgraph's events, streamed with `stream_subgraphs=True`: named `mode|ns`.
    nested_thread = client.threads.create(metadata={**owner, "graph": "nested"})
    nested_id = nested_thread["thread_id"]
    norm.name(nested_id, "thread_nested")
    nested_events = []
    for part in client.runs.stream(
        nested_id,
        "nested",
        input={"log": []},
        stream_mode=["updates", "values"],
        stream_subgraphs=True,
    ):
        if part.event == "metadata" and isinstance(part.data, dict):
            norm.name(part.data.get("run_id"), "run_nested")
        nested_events.append({"event": part.event, "data": part.data})
    flat = []
    for part in client.runs.stream(nested_id, "nested", input={"log": []}, stream_mode="updates"):
        if part.event != "metadata":
            flat.append({"event": part.event, "data": part.data})
    steps["subgraphs.stream"] = {"events": nested_events, "without_subgraphs": flat}

    t["steps"] = norm(steps)
    json.dump(t, sys.stdout, indent=2, sort_keys=True)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
