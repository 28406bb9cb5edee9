"""LangChain's `Graph.draw_mermaid()` of drawings given as JSON, for stategraph's test of its
own Mermaid writer.

Usage: python mermaid.py < drawings.json

stdin holds a list of drawings, each `{"nodes": [id, ...], "edges": [[source, target,
conditional, label or null], ...]}`; stdout is the JSON list of their Mermaid texts.
"""

import json
import sys

from langchain_core.runnables.graph import Graph


def draw(drawing):
    g = Graph()
    for node in drawing["nodes"]:
        g.add_node(None, node)
    for source, target, conditional, label in drawing["edges"]:
        g.add_edge(g.nodes[source], g.nodes[target], label, conditional)
    return g.draw_mermaid()


if __name__ == "__main__":
    json.dump([draw(d) for d in json.load(sys.stdin)], sys.stdout)
