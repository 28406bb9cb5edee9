"""Drives a stategraph Agent Server with LangGraph's own Python client (langgraph-sdk).

Usage: seed_flow.py URL. Prints one JSON object describing what the server answered.
"""

import json
import sys

from langgraph_sdk import get_sync_client


def main() -> None:
    url = sys.argv[1]
    client = get_sync_client(url=url)
    out = {}

    assistants = client.assistants.search(graph_id="seed")
    out["assistants"] = [
        {"assistant_id": a["assistant_id"], "graph_id": a["graph_id"], "name": a["name"]}
        for a in assistants
    ]
    seed = next(a for a in assistants if a["graph_id"] == "seed")
    out["assistant_get"] = client.assistants.get(seed["assistant_id"])["graph_id"]

    drawn = client.assistants.get_graph(seed["assistant_id"])
    out["graph"] = {
        "nodes": [n["id"] for n in drawn["nodes"]],
        "edges": [[e["source"], e["target"]] for e in drawn["edges"]],
    }

    thread = client.threads.create(metadata={"owner": "sdk-test", "n": 1})
    thread_id = thread["thread_id"]
    out["thread_created"] = {"status": thread["status"], "metadata": thread["metadata"]}

    out["wait"] = client.runs.wait(thread_id, "seed", input={"foo": "", "bar": []})

    state = client.threads.get_state(thread_id)
    out["state"] = {
        "values": state["values"],
        "next": state["next"],
        "checkpoint_id": state["checkpoint"]["checkpoint_id"],
        "step": state["metadata"]["step"],
    }

    history = client.threads.get_history(thread_id)
    out["history"] = [
        {
            "step": h["metadata"]["step"],
            "source": h["metadata"]["source"],
            "next": h["next"],
            "values": h["values"],
            "checkpoint_id": h["checkpoint"]["checkpoint_id"],
        }
        for h in history
    ]

    thread2 = client.threads.create(metadata={"owner": "sdk-test", "n": 2})
    events = []
    for part in client.runs.stream(
        thread2["thread_id"],
        "seed",
        input={"foo": "", "bar": []},
        stream_mode=["values", "updates"],
    ):
        events.append({"event": part.event, "data": part.data})
    out["stream"] = events

    out["thread_after"] = client.threads.get(thread_id)["status"]
    found = client.threads.search(metadata={"owner": "sdk-test", "n": 2})
    out["search"] = [t["thread_id"] == thread2["thread_id"] for t in found]
    out["search_all"] = len(client.threads.search(metadata={"owner": "sdk-test"}))

    updated = client.threads.update_state(thread_id, {"foo": "edited"}, as_node="node_b")
    out["update_state"] = bool(updated["checkpoint"]["checkpoint_id"])
    out["after_update"] = client.threads.get_state(thread_id)["values"]

    first = history[-1]["checkpoint"]
    out["state_at_id"] = client.threads.get_state(
        thread_id, checkpoint_id=first["checkpoint_id"]
    )["metadata"]["step"]
    out["state_at_checkpoint"] = client.threads.get_state(thread_id, checkpoint=first)[
        "metadata"
    ]["step"]
    runs = client.runs.list(thread2["thread_id"])
    out["runs"] = [r["status"] for r in runs]
    out["run_get"] = client.runs.get(thread2["thread_id"], runs[0]["run_id"])["status"]
    out["count"] = client.threads.count(metadata={"owner": "sdk-test"})
    out["assistants_count"] = client.assistants.count(graph_id="seed")
    copied = client.threads.copy(thread2["thread_id"])
    out["copied"] = client.threads.get_state(copied["thread_id"])["values"]

    background = client.runs.create(thread2["thread_id"], "seed", input={"foo": "", "bar": []})
    out["join"] = client.runs.join(thread2["thread_id"], background["run_id"])

    client.store.put_item(["users", "u1"], "prefs", {"color": "blue"})
    client.store.put_item(["users", "u2"], "prefs", {"color": "red"})
    item = client.store.get_item(["users", "u1"], "prefs")
    out["store_get"] = {"namespace": item["namespace"], "value": item["value"]}
    found = client.store.search_items(["users"], filter={"color": "red"})
    out["store_search"] = [i["namespace"] for i in found["items"]]
    out["store_all"] = len(client.store.search_items([], limit=100)["items"])
    out["store_namespaces"] = client.store.list_namespaces()["namespaces"]
    client.store.delete_item(["users", "u1"], "prefs")
    out["store_deleted"] = client.store.get_item(["users", "u1"], "prefs")

    out["stateless"] = client.runs.wait(None, "seed", input={"foo": "", "bar": ["x"]})

    try:
        client.threads.get("00000000-0000-0000-0000-000000000000")
        out["missing_thread"] = None
    except Exception as e:  # httpx.HTTPStatusError
        out["missing_thread"] = e.response.status_code

    print(json.dumps(out))


if __name__ == "__main__":
    main()
