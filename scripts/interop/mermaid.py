"""LangChain's `Graph.draw_mermaid()` of drawings given as JSON, for stategraph's test of its
own Mermaid writer.

Usage: python mermaid.py < drawings.json
       python mermaid.py graphs

stdin holds a list of drawings, each `{"nodes": [id, ...], "edges": [[source, target,
conditional, label or null], ...], "metadata": {node: [[key, value], ...]}}`; stdout is the
JSON list of their Mermaid texts. With `graphs`, stdout is instead the JSON map from a graph's
name to `get_graph().draw_mermaid()` of LangGraph graphs stategraph's test builds the same:
- `branches`: START → check; check's conditional edge maps `retry` → fix, `done` → report,
  `stop` → END; fix → check;
- `send_defer`: START → plan; plan sends to `work` (path map `["work"]`); work → join, a
  deferred node; the graph breaks before `work`.
"""
import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

import json
import sys

from langchain_core.runnables.graph import Graph


class S(TypedDict):
    n: int
    log: Annotated[list, operator.add]


def graphs():
    g = StateGraph(S)
    for n in ["check", "fix", "report"]:
        g.add_node(n, lambda s: {})
    g.add_edge(START, "check")
    g.add_conditional_edges("check", lambda s: "done", {"retry": "fix", "done": "report", "stop": END})
    g.add_edge("fix", "check")
    branches = g.compile()

    g = StateGraph(S)
    g.add_node("plan", lambda s: {})
    g.add_node("work", lambda s: {})
    g.add_node("join", lambda s: {}, defer=True)
    g.add_edge(START, "plan")
    g.add_conditional_edges("plan", lambda s: [Send("work", s)], ["work"])
    g.add_edge("work", "join")
    send_defer = g.compile(interrupt_before=["work"])
    return {"branches": branches, "send_defer": send_defer}


def draw(drawing):
    g = Graph()
    for node in drawing["nodes"]:
        g.add_node(None, node, metadata=dict(drawing.get("metadata", {}).get(node, [])) or None)
    for source, target, conditional, label in drawing["edges"]:
        g.add_edge(g.nodes[source], g.nodes[target], label, conditional)
    return g.draw_mermaid()


if __name__ == "__main__":
    if sys.argv[1:] == ["graphs"]:
        json.dump({k: g.get_graph().draw_mermaid() for k, g in graphs().items()}, sys.stdout)
    else:
        json.dump([draw(d) for d in json.load(sys.stdin)], sys.stdout)
