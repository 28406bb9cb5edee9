"""LangChain's `Graph.draw_mermaid()` of drawings given as JSON, for stategraph's test of its
own Mermaid writer.

Usage: python mermaid.py < drawings.json
       python mermaid.py ascii < drawings.json
       python mermaid.py graphs

stdin holds a list of drawings, each `{"nodes": [id, ...], "edges": [[source, target,
conditional, label or null], ...], "metadata": {node: {key: value, ...}}}`; stdout is the
JSON list of their Mermaid texts; with `ascii`, of their `draw_ascii()` texts (each node named
by its id's last `:`-separated segment, as LangGraph names a subgraph's nodes drawn into its
parent), or `{"error": message}` where LangChain fails. With `graphs`, stdout is instead the JSON map from a
drawing's name to `{"mermaid": get_graph(xray=...).draw_mermaid(), "json": ...to_json()}`
(without the Python class ids, as the Agent Server returns it) of LangGraph graphs
stategraph's test builds the same:
- `branches`: START → check; check's conditional edge maps `retry` → fix, `done` → report,
  `stop` → END; fix → check;
- `send_defer`: START → plan; plan sends to `work` (path map `["work"]`); work → join, a
  deferred node; the graph breaks before `work`;
- `nested`, drawn with xray off (`nested`), 1 (`nested@1`) and on (`nested@all`): START →
  plan; plan's path map `go` → sub, `skip` → side; sub → side → END. `sub` is a subgraph
  START → a → deep → b → END, and `deep` one of START → x → y → END;
- `forked@all`: START → fan → after → END, where `fan` starts in two nodes p and q, each
  ending the subgraph;
- `commands`: a's commands go to b or END; b's to c (labelled `go c`) or b (`again`);
  c → d; d has its own error handler, with an edge to a, and every other node the default
  handler; the graph breaks after c.
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

    def node(s):
        return {}

    leaf = StateGraph(S)
    leaf.add_node("x", node)
    leaf.add_node("y", node)
    leaf.add_edge(START, "x")
    leaf.add_edge("x", "y")
    leaf.add_edge("y", END)
    inner = StateGraph(S)
    inner.add_node("a", node)
    inner.add_node("deep", leaf.compile())
    inner.add_node("b", node)
    inner.add_edge(START, "a")
    inner.add_edge("a", "deep")
    inner.add_edge("deep", "b")
    inner.add_edge("b", END)
    outer = StateGraph(S)
    outer.add_node("plan", node)
    outer.add_node("sub", inner.compile())
    outer.add_node("side", node)
    outer.add_edge(START, "plan")
    outer.add_conditional_edges("plan", lambda s: "go", {"go": "sub", "skip": "side"})
    outer.add_edge("sub", "side")
    outer.add_edge("side", END)
    nested = outer.compile()

    fan = StateGraph(S)
    fan.add_node("p", node)
    fan.add_node("q", node)
    fan.add_edge(START, "p")
    fan.add_edge(START, "q")
    fan.add_edge("p", END)
    fan.add_edge("q", END)
    forked = StateGraph(S)
    forked.add_node("fan", fan.compile())
    forked.add_node("after", node)
    forked.add_edge(START, "fan")
    forked.add_edge("fan", "after")
    forked.add_edge("after", END)
    forked = forked.compile()

    g = StateGraph(S)
    g.set_node_defaults(error_handler=node)
    g.add_node("a", node, destinations=("b", END))
    g.add_node("b", node, destinations={"c": "go c", "b": "again"})
    g.add_node("c", node)
    g.add_node("d", node, error_handler=node)
    g.add_edge(START, "a")
    g.add_edge("c", "d")
    g.add_edge("__error_handler__d", "a")
    commands = g.compile(interrupt_after=["c"])
    return {
        "branches": (branches, False),
        "send_defer": (send_defer, False),
        "nested": (nested, False),
        "nested@1": (nested, 1),
        "nested@all": (nested, True),
        "forked@all": (forked, True),
        "commands": (commands, False),
    }


def served_json(graph):
    """`to_json()` as the Agent Server returns it: without the nodes' Python class ids."""
    out = graph.to_json()
    for node in out["nodes"]:
        if isinstance(node.get("data"), dict):
            node["data"].pop("id", None)
    return out


def draw_graph(drawing):
    g = Graph()
    for node in drawing["nodes"]:
        g.add_node(None, node, metadata=drawing.get("metadata", {}).get(node) or None)
    for source, target, conditional, label in drawing["edges"]:
        g.add_edge(g.nodes[source], g.nodes[target], label, conditional)
    return g


def draw(drawing):
    return draw_graph(drawing).draw_mermaid()


def edges_in_order():
    """grandalf keeps a component's edges in a `set` of objects hashed by address, so
    LangChain's ASCII layout of a graph whose long or crossing edges compete for a place
    depends on where Python allocated them, and varies from run to run. stategraph takes
    the edges in the order the drawing lists them; here grandalf is made to do the same,
    so that the two compare exactly."""
    import grandalf.graphs as graphs

    created = graphs.Edge.__init__
    count = iter(range(1 << 62))

    def numbered(self, *args, **kwargs):
        created(self, *args, **kwargs)
        self.order = next(count)

    class InOrder(graphs.graph_core):
        def __init__(self, V=None, E=None, directed=True):
            if E is not None:
                E = sorted(E, key=lambda e: e.order)
            super().__init__(V, E, directed)

    graphs.Edge.__init__ = numbered
    graphs.Graph.component_class = InOrder


def ascii_or_error(graph):
    try:
        return graph.draw_ascii()
    except ValueError as e:
        return {"error": str(e)}


def ascii_art(drawing):
    g = draw_graph(drawing)
    for id_, node in list(g.nodes.items()):
        g.nodes[id_] = node.copy(name=id_.split(":")[-1])
    return ascii_or_error(g)


if __name__ == "__main__":
    if sys.argv[1:] == ["ascii"]:
        edges_in_order()
        json.dump([ascii_art(d) for d in json.load(sys.stdin)], sys.stdout)
    elif sys.argv[1:] == ["graphs"]:
        edges_in_order()
        drawn = {k: g.get_graph(xray=x) for k, (g, x) in graphs().items()}
        json.dump(
            {
                k: {"mermaid": d.draw_mermaid(), "json": served_json(d), "ascii": ascii_or_error(d)}
                for k, d in drawn.items()
            },
            sys.stdout,
        )
    else:
        json.dump([draw(d) for d in json.load(sys.stdin)], sys.stdout)
