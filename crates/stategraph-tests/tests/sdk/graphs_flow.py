"""Every graph a server serves, drawn through LangGraph's Python SDK: for each of the
scenario's graphs (bench/agent-server/reference/graphs.py), `assistants.get_graph` with xray
off, on and at depth 1, and `assistants.get_subgraphs`. Run against two servers serving the
same graphs, the transcripts must be equal.

Usage: python graphs_flow.py BASE_URL; prints the transcript as JSON."""

import json
import sys

from langgraph_sdk import get_sync_client

client = get_sync_client(url=sys.argv[1])
out = {}
for graph_id in ["seed", "chat", "fanout", "slow", "nested", "workflow"]:
    assistant = client.assistants.search(graph_id=graph_id)[0]["assistant_id"]
    for xray in (False, True, 1):
        out[f"{graph_id}@{xray}"] = client.assistants.get_graph(assistant, xray=xray)
    out[f"{graph_id} subgraphs"] = sorted(client.assistants.get_subgraphs(assistant))
json.dump(out, sys.stdout)
