"""Drives a ReAct agent served by a stategraph Agent Server with LangGraph's own Python client
(langgraph-sdk): a person approves one tool call and rejects another, and the model's tokens
stream as `messages-tuple` and as `messages`.

Usage: agent_approval.py URL. Prints one JSON object describing what the server answered.
"""

import json
import sys

from langgraph_sdk import get_sync_client


def main() -> None:
    client = get_sync_client(url=sys.argv[1])
    out = {}
    thread = client.threads.create()["thread_id"]

    # The agent asks to call a tool and stops before running it.
    out["first"] = client.runs.wait(
        thread, "agent", input={"messages": [{"role": "user", "content": "Weather in Paris?"}]}
    )
    out["status"] = client.threads.get(thread)["status"]
    state = client.threads.get_state(thread)
    out["next"] = state["next"]
    out["pending"] = state["values"]["messages"][-1]["tool_calls"]

    # Approved: the run goes on from the checkpoint; its events as `messages-tuple`.
    out["approved"] = [
        {"event": p.event, "data": p.data}
        for p in client.runs.stream(
            thread, "agent", input=None, stream_mode=["messages-tuple", "values"]
        )
    ]
    out["after_approval"] = client.threads.get_state(thread)["values"]["messages"]
    out["status_after_approval"] = client.threads.get(thread)["status"]

    # Rejected: the person answers for the tool, then the agent goes on (`messages` mode).
    client.runs.wait(
        thread, "agent", input={"messages": [{"role": "user", "content": "Weather in Rome?"}]}
    )
    call = client.threads.get_state(thread)["values"]["messages"][-1]["tool_calls"][0]
    client.threads.update_state(
        thread,
        {"messages": [{"role": "tool", "content": "the user declined", "tool_call_id": call["id"]}]},
        as_node="tools",
    )
    out["rejected"] = [
        {"event": p.event, "data": p.data}
        for p in client.runs.stream(thread, "agent", input=None, stream_mode="messages")
    ]
    out["final"] = client.threads.get_state(thread)["values"]["messages"]
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
