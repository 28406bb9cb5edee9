"""Reference graphs served by the Python `langgraph dev` server (see ../README.md).

`seed`: START -> node_a -> node_b -> END over a state with `foo` (last value wins)
and `bar` (list, appended with operator.add).
"""

import operator
from typing import Annotated

from typing_extensions import TypedDict

from langgraph.graph import END, START, StateGraph


class State(TypedDict):
    foo: str
    bar: Annotated[list[str], operator.add]


def node_a(state: State) -> dict:
    return {"foo": "a", "bar": ["a"]}


def node_b(state: State) -> dict:
    return {"foo": "b", "bar": ["b"]}


builder = StateGraph(State)
builder.add_node("node_a", node_a)
builder.add_node("node_b", node_b)
builder.add_edge(START, "node_a")
builder.add_edge("node_a", "node_b")
builder.add_edge("node_b", END)

graph = builder.compile()
