"""Answers the `approval` agent's review request with each decision kind through LangGraph's
Python SDK, and prints the transcript (ids left out) as JSON.

Usage: python approval_flow.py BASE_URL

For each decision (approve, edit to Oslo, reject with a reason, respond): a new thread, a run
asking "Weather in Paris?" (it stops on the review), the thread's state (its interrupt and
next nodes), then a run resuming with `{"decisions": [decision]}`, and the final state.
"""

import json
import sys

from langgraph_sdk import get_sync_client


def message(m):
    return {
        k: m.get(k)
        for k in ("type", "content", "name", "tool_call_id", "status", "additional_kwargs")
    } | {"tool_calls": [[c["name"], c["args"], c["id"]] for c in m.get("tool_calls") or []]}


def state(client, thread_id):
    s = client.threads.get_state(thread_id)
    return {
        "next": s["next"],
        "messages": [message(m) for m in s["values"].get("messages", [])],
        "keys": sorted(s["values"]),
        "interrupts": [i["value"] for t in s["tasks"] for i in t.get("interrupts", [])],
    }


def main(base):
    client = get_sync_client(url=base)
    decisions = [
        {"type": "approve"},
        {"type": "edit", "edited_action": {"name": "get_weather", "args": {"city": "Oslo"}}},
        {"type": "reject", "message": "not today"},
        {"type": "respond", "message": "It is raining."},
    ]
    out = {}
    for decision in decisions:
        thread = client.threads.create()
        tid = thread["thread_id"]
        first = client.runs.wait(
            tid,
            "approval",
            input={"messages": [{"role": "user", "content": "Weather in Paris?"}]},
        )
        stopped = state(client, tid)
        final = client.runs.wait(tid, "approval", command={"resume": {"decisions": [decision]}})
        out[decision["type"]] = {
            "first": {
                "messages": [message(m) for m in first.get("messages", [])],
                "interrupts": [i["value"] for i in first.get("__interrupt__", [])],
            },
            "stopped": stopped,
            "final": {"messages": [message(m) for m in final.get("messages", [])]},
            "end": state(client, tid),
        }
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1])
