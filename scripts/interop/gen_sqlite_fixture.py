"""Write the Python-side SQLite interop fixture with Python LangGraph.

Usage: python gen_sqlite_fixture.py OUT.sqlite

Runs several small graphs with langgraph 1.2.22 + langgraph-checkpoint-sqlite 3.1.2 (the
versions scripts/python-env.sh pins) into a fresh OUT.sqlite, then writes what Python's
SqliteSaver reads back from it to OUT.expected.json (see dump_sqlite.py). The Rust test
`crates/stategraph-sqlite/tests/python_interop.rs` must read the same from the file.

The script runs as the module `gen_sqlite_fixture` (see the bottom), so its own classes (Point,
Box, Color) are stored under that module name rather than `__main__`: any Python process that
has this directory on sys.path, dump_sqlite.py included, can rebuild them, and
`dump_sqlite.py OUT.sqlite --values-json` prints exactly OUT.expected.json.
"""

import datetime
import decimal
import enum
import json
import operator
import os
import sqlite3
import sys
import uuid
from dataclasses import dataclass
from typing import Annotated, Any, Optional

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, Send, interrupt
from pydantic import BaseModel
from typing_extensions import TypedDict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dump_sqlite import dump  # noqa: E402


class Seed(TypedDict):
    foo: str
    bar: Annotated[list[str], operator.add]


def seed_graph(saver):
    g = StateGraph(Seed)
    g.add_node("node_a", lambda s: {"foo": "a", "bar": ["a"]})
    g.add_node("node_b", lambda s: {"foo": "b", "bar": ["b"]})
    g.add_edge(START, "node_a")
    g.add_edge("node_a", "node_b")
    g.add_edge("node_b", END)
    return g.compile(checkpointer=saver)


def chat_graph(saver):
    def agent(state):
        return {
            "messages": [
                AIMessage(
                    content="",
                    id="ai-1",
                    tool_calls=[{"name": "search", "args": {"q": "x"}, "id": "call_1"}],
                )
            ]
        }

    def tool(state):
        return {"messages": [ToolMessage(content="result", tool_call_id="call_1", id="tool-1")]}

    g = StateGraph(MessagesState)
    g.add_node("agent", agent)
    g.add_node("tool", tool)
    g.add_edge(START, "agent")
    g.add_edge("agent", "tool")
    g.add_edge("tool", END)
    return g.compile(checkpointer=saver)


class Point(BaseModel):
    x: int
    label: str


@dataclass
class Box:
    width: float
    tags: list


class Color(enum.Enum):
    RED = "red"


class Rich(TypedDict, total=False):
    aware: Any
    naive: Any
    ident: Any
    money: Any
    group: Any
    pair: Any
    raw: Any
    nested: Any
    big: Any
    neg: Any
    ints: Any
    real: Any
    reals: Any
    text: Any
    nothing: Any
    model: Any
    box: Any
    color: Any


def rich_graph(saver):
    def fill(state):
        return {
            "aware": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
            "naive": datetime.datetime(2024, 1, 2, 3, 4, 5),
            "ident": uuid.UUID("12345678-1234-5678-1234-567812345678"),
            "money": decimal.Decimal("12.50"),
            "group": {"only"},
            "pair": (1, "two"),
            "raw": b"\x00\xffbytes",
            "nested": {1: "int key", "k": [1, {"deep": None}]},
            "big": 2**63,
            "neg": -123456,
            # every msgpack int width, both signs
            "ints": [0, 127, 128, 255, 256, 65535, 65536, 2**32, 2**64 - 1,
                     -1, -32, -33, -128, -129, -32769, -(2**31) - 1, -(2**63)],
            "real": 3.25,
            "reals": [-0.0, 0.1, 1e300, float("inf")],
            "text": "héllo ✓ 你好",
            "nothing": None,
            "model": Point(x=1, label="p"),
            "box": Box(width=2.5, tags=["t"]),
            "color": Color.RED,
        }

    g = StateGraph(Rich)
    g.add_node("fill", fill)
    g.add_edge(START, "fill")
    return g.compile(checkpointer=saver)


class Fan(TypedDict):
    log: Annotated[list[str], operator.add]


def fail_graph(saver):
    def b(state):
        raise ValueError("boom")

    g = StateGraph(Fan)
    g.add_node("a", lambda s: {"log": ["a"]})
    g.add_node("b", b)
    g.add_node("c", lambda s: {"log": ["c"]})
    g.add_edge(START, "a")
    g.add_edge(START, "b")
    g.add_edge("a", "c")
    g.add_edge("b", "c")
    return g.compile(checkpointer=saver)


def hitl_graph(saver):
    def ask(state):
        answer = interrupt({"question": "approve?"})
        return {"log": [f"answer: {answer}"]}

    g = StateGraph(Fan)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    return g.compile(checkpointer=saver)


class Parent(TypedDict):
    log: Annotated[list[str], operator.add]
    topic: str


class Inner(TypedDict, total=False):
    log: Annotated[list[str], operator.add]  # shared with Parent
    note: str  # the subgraph's own key


def sub_graph(saver):
    inner = StateGraph(Inner)
    inner.add_node("one", lambda s: {"log": ["sub-one"], "note": "n1"})
    inner.add_node("two", lambda s: {"log": [f"sub-two after {s['note']}"]})
    inner.add_edge(START, "one")
    inner.add_edge("one", "two")
    g = StateGraph(Parent)
    g.add_node("sub", inner.compile())
    g.add_node("after", lambda s: {"log": ["after"]})
    g.add_edge(START, "sub")
    g.add_edge("sub", "after")
    return g.compile(checkpointer=saver)


class Work(TypedDict, total=False):
    done: Annotated[list[int], operator.add]
    item: int


def sends_graph(saver):
    g = StateGraph(Work)
    g.add_node("worker", lambda s: {"done": [s["item"] * 10]})
    g.add_conditional_edges(START, lambda s: [Send("worker", {"item": i}) for i in range(3)])
    return g.compile(checkpointer=saver)


def main(out):
    if os.path.exists(out):
        os.remove(out)
    conn = sqlite3.connect(out, check_same_thread=False)
    saver = SqliteSaver(conn)

    seed = seed_graph(saver)
    cfg = {"configurable": {"thread_id": "seed"}}
    seed.invoke({"foo": "", "bar": []}, cfg)
    seed.invoke({"foo": "x", "bar": ["x"]}, cfg)
    seed.update_state(cfg, {"foo": "upd", "bar": ["u"]})
    history = list(seed.get_state_history(cfg))
    old = history[-2].config  # the first run's step-0 checkpoint
    seed.update_state(old, {"foo": "fork"}, as_node="node_a")

    chat_graph(saver).invoke(
        {"messages": [SystemMessage(content="be brief", id="sys-1"), HumanMessage(content="hi", id="h1")]},
        {"configurable": {"thread_id": "chat", "user_id": "u-1"}},
    )
    rich_graph(saver).invoke({}, {"configurable": {"thread_id": "rich"}})
    try:
        fail_graph(saver).invoke({"log": []}, {"configurable": {"thread_id": "fail"}})
    except ValueError:
        pass
    hitl = hitl_graph(saver)
    hitl.invoke({"log": []}, {"configurable": {"thread_id": "hitl"}})
    hitl.invoke({"log": []}, {"configurable": {"thread_id": "hitl2"}})
    hitl.invoke(Command(resume="yes"), {"configurable": {"thread_id": "hitl2"}})
    sub_graph(saver).invoke({"log": [], "topic": "t"}, {"configurable": {"thread_id": "sub"}})
    sends_graph(saver).invoke({"done": []}, {"configurable": {"thread_id": "sends"}})

    # Fold the WAL into the file and leave it in rollback-journal mode, compacted: one
    # self-contained .sqlite, no -wal/-shm. (dump() reads without switching back to WAL.)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.commit()
    conn.execute("PRAGMA journal_mode=DELETE")
    conn.execute("VACUUM")
    conn.close()

    expected = dump(out, with_repr=True)
    base = out[: -len(".sqlite")] if out.endswith(".sqlite") else out
    with open(base + ".expected.json", "w", encoding="utf-8") as f:
        json.dump(expected, f, indent=1, sort_keys=True, ensure_ascii=False)
        f.write("\n")
    print(f"{out}: {len(expected['tuples'])} checkpoints", file=sys.stderr)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    import gen_sqlite_fixture  # this file again, under its importable name (see the docstring)

    gen_sqlite_fixture.main(sys.argv[1])
