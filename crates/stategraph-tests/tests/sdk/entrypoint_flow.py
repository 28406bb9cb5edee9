"""A Functional API workflow served as an assistant, through LangGraph's Python SDK: its
assistant and graph, a run streamed up to an interrupt, the interrupted thread's state, the
interrupt answered (waited and streamed), `previous` carried to the next run, the thread's
history and a stateless run. Run against a server serving entrypoint `workflow` (see
bench/agent-server/reference/graphs.py), it prints a transcript of what the server answered,
normalized (no ids or times), to compare with another server's.

Usage: python entrypoint_flow.py BASE_URL; prints the transcript as JSON."""

import json
import re
import sys

from langgraph_sdk import get_sync_client

client = get_sync_client(url=sys.argv[1])
out = {}
INPUT = {"topics": ["rust", "graphs"]}

UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
HEX32 = re.compile(r"\b[0-9a-f]{32}\b")
TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(\+00:00|Z)?")


# Metadata keys that describe LangGraph's platform (its API version, plan, host and URL),
# which stategraph does not claim: left out on both sides.
PLATFORM = ("langgraph_api_url", "langgraph_api_version", "langgraph_host", "langgraph_plan")


def without_platform(value):
    if isinstance(value, dict):
        return {k: without_platform(v) for k, v in value.items() if k not in PLATFORM}
    if isinstance(value, list):
        return [without_platform(v) for v in value]
    return value


def norm(value):
    """`value` without what differs run to run (ids and times become placeholders) and
    without the platform's metadata keys."""
    text = json.dumps(without_platform(value), sort_keys=True)
    text = UUID.sub("<uuid>", text)
    text = HEX32.sub("<id>", text)
    text = TIME.sub("<time>", text)
    return json.loads(text)


def events(parts):
    """The events, normalized; tasks running in parallel report their updates in the order
    they finish (on either server), so each run of consecutive task updates is sorted."""
    out = norm([{"event": p.event, "data": p.data} for p in parts])
    task_update = lambda e: e["event"] == "updates" and "__interrupt__" not in e["data"]
    i = 0
    while i < len(out):
        j = i
        while j < len(out) and task_update(out[j]):
            j += 1
        out[i:j] = sorted(out[i:j], key=lambda e: json.dumps(e, sort_keys=True))
        i = max(j, i + 1)
    return out


def snapshot(state):
    """What a state snapshot says, without its addresses and times."""
    return norm(
        {
            "values": state["values"],
            "next": state["next"],
            "tasks": [
                {
                    "name": t["name"],
                    "interrupts": t["interrupts"],
                    "error": t["error"],
                    "result": t.get("result"),
                }
                for t in state["tasks"]
            ],
            "interrupts": state.get("interrupts"),
            "step": state["metadata"].get("step"),
            "source": state["metadata"].get("source"),
            "parent": state["parent_checkpoint"] is not None,
        }
    )


assistant = client.assistants.search(graph_id="workflow")[0]
out["assistant"] = {"graph_id": assistant["graph_id"], "name": assistant["name"]}
out["graph"] = client.assistants.get_graph(assistant["assistant_id"])

thread = client.threads.create()["thread_id"]
out["stream"] = events(
    client.runs.stream(thread, "workflow", input=INPUT, stream_mode=["values", "updates"])
)
out["thread_interrupted"] = norm(
    {k: v for k, v in client.threads.get(thread).items() if k in ("status", "values", "interrupts")}
)
out["state_interrupted"] = snapshot(client.threads.get_state(thread))

out["resumed"] = norm(client.runs.wait(thread, "workflow", command={"resume": "yes"}))
out["state_done"] = snapshot(client.threads.get_state(thread))
out["thread_done"] = norm(
    {k: v for k, v in client.threads.get(thread).items() if k in ("status", "values", "interrupts")}
)

# The second run sees `previous` (what the first saved); its answer streamed.
client.runs.wait(thread, "workflow", input={"topics": ["time travel"]})
out["resumed_stream"] = events(
    client.runs.stream(
        thread, "workflow", command={"resume": "yes"}, stream_mode=["updates", "values"]
    )
)
out["state_second"] = snapshot(client.threads.get_state(thread))

# A third run, its tasks streamed (what each is given and returns), rejected: `previous` is
# saved as it was.
out["tasks_stream"] = events(
    client.runs.stream(thread, "workflow", input={"topics": ["nothing"]}, stream_mode="tasks")
)
out["rejected"] = norm(client.runs.wait(thread, "workflow", command={"resume": "no"}))

history = client.threads.get_history(thread, limit=100)
out["history"] = [snapshot(h) for h in history]

# A stateless run stops at the interrupt; its output is the interrupt.
out["stateless"] = norm(client.runs.wait(None, "workflow", input=INPUT))

json.dump(out, sys.stdout)
