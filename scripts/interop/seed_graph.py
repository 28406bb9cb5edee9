"""The seeds' 2-node graph (and a routing variant) in Python LangGraph, on a SQLite file.

Usage: python seed_graph.py DB GRAPH THREAD ACTION...

DB is a SQLite file path, a postgres:// URL (LangGraph's PostgresSaver on it) or a mongodb://
URL (langgraph-checkpoint-mongodb's MongoDBSaver, collections `checkpoints` and
`checkpoint_writes` in the database the URL's path names, else in `checkpointing_db`).

GRAPH: `seed` (START → node_a → node_b → END, foo last value, bar list with operator.add),
`route` (START → decide → left|right by a conditional edge on `go_left`, then END), `sends`
(a conditional edge from START sends one `Send("worker", {"item": i})` per item; workers
append `item * 10` to `done`) or `defer` / `defer_join` (START → a → b → b2 and a → c,
then b2 and c into `d`, added with `defer=True`: by two edges, or by one join edge) or
`steps` (START → count, looping while the managed value `remaining: RemainingSteps` is
above 10002 (the default limit allows 10006 at the first step); `count` logs `remaining:last`, `last` being `IsLastStep`) or `overwrite` (START → a, b in parallel → c over `log`
(operator.add): a and c append their names, b writes `Overwrite(["b"])`) or `command`
(START → router, which returns
`Command(update={"log": ["router"]}, goto="right")`) or `dchat` (START → reply over `messages: Annotated[list, DeltaChannel(concat,
snapshot_frequency=DELTA_K)]`, DELTA_K from the environment, default 10: stategraph's
`delta_storage` chat in its delta-storage tests) or `sub` (START → sub → after, where
`sub` is a compiled subgraph one → two over the same state), or `hitl` (START → ask, which
calls `interrupt({"question": "approve?"})` and logs the answer), or `react` (LangGraph's
prebuilt `create_react_agent` with a tool `get_weather` and a scripted model, stopping
before its tools), or `react_manual` (the same loop built by hand: a model node `agent`,
`ToolNode` as `tools`, `tools_condition` routing between them).
ACTIONS, in order: `run` (invoke with the graph's standard input), `resume` (invoke(None)),
`resume_yes` (invoke(Command(resume="yes"))), `resume_yes_logged`
(invoke(Command(resume="yes", update={"log": ["cmd"]}))), `command_left`
(invoke(Command(update={"log": ["cmd"]}, goto="left"))), `turns:N` (N chat turns of the `dchat` graph),
`history` (print get_state_history as JSON), `state` (print get_state as JSON), `update`
(update_state with {"foo": "upd", "bar": ["u"]} as the default node), `update_as_a`
(update_state with {"foo": "x"} as node_a), `end` (update_state(None, as_node=END): the
pending tasks cleared), `messages` (the `chat` graph's messages as
[class, content, id]), `ask:TEXT` (invoke with a user message), `agent_messages` (the
messages with their tool calls, and the state's `next`), `outline` (each checkpoint, oldest
first: step, source, next, its channels and the channels of its pending writes).

With LANGGRAPH_AES_KEY set, the saver encrypts with
`EncryptedSerializer.from_pycryptodome_aes()` (that key).

Used by the Rust interop tests to compare Python's view of threads stategraph wrote with
Python's own runs, and to continue those threads from Python.
"""

import json
import operator
import os
import sqlite3
import sys
from typing import Annotated

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.managed import IsLastStep, RemainingSteps
from langgraph.types import Command, Overwrite, Send, interrupt
from typing_extensions import TypedDict


class Seed(TypedDict):
    foo: str
    bar: Annotated[list[str], operator.add]


class Route(TypedDict):
    log: Annotated[list[str], operator.add]
    go_left: bool


class Steps(TypedDict):
    log: Annotated[list[str], operator.add]
    remaining: RemainingSteps
    last: IsLastStep


class Work(TypedDict, total=False):
    items: list[int]
    done: Annotated[list[int], operator.add]
    item: int


def chat_message(who, turn):
    """The ~200-byte message of the delta chat tests (the same text stategraph's test makes)."""
    return (f"{who} message of turn {turn}: " + "lorem ipsum " * 20)[:200]


def build(name, saver):
    if name == "dchat":
        from langgraph.channels.delta import DeltaChannel

        def concat(state, writes):
            out = list(state)
            for w in writes:
                out.extend(w)
            return out

        k = int(os.environ.get("DELTA_K", "10"))

        class DChat(TypedDict):
            messages: Annotated[list, DeltaChannel(concat, snapshot_frequency=k)]

        g = StateGraph(DChat)
        g.add_node(
            "reply",
            lambda s: {"messages": [chat_message("AI", len(s["messages"]) // 2)]},
        )
        g.add_edge(START, "reply")
        return g.compile(checkpointer=saver), None
    if name == "sends":
        g = StateGraph(Work)
        g.add_node("worker", lambda s: {"done": [s["item"] * 10]})
        g.add_conditional_edges(START, lambda s: [Send("worker", {"item": i}) for i in s["items"]])
        return g.compile(checkpointer=saver), {"items": [1, 2, 3], "done": []}
    if name == "sub":
        inner = StateGraph(Route)
        inner.add_node("one", lambda s: {"log": ["sub-one"]})
        inner.add_node("two", lambda s: {"log": ["sub-two"]})
        inner.add_edge(START, "one")
        inner.add_edge("one", "two")
        g = StateGraph(Route)
        g.add_node("sub", inner.compile())
        g.add_node("after", lambda s: {"log": ["after"]})
        g.add_edge(START, "sub")
        g.add_edge("sub", "after")
        return g.compile(checkpointer=saver), {"log": [], "go_left": True}
    if name == "chat":
        from langchain_core.messages import AIMessage, HumanMessage
        from langgraph.graph import MessagesState

        def agent(s):
            last = s["messages"][-1]
            n = sum(1 for m in s["messages"] if isinstance(m, AIMessage))
            return {"messages": [AIMessage(content=f"echo: {last.content}", id=f"a{n + 1}")]}

        g = StateGraph(MessagesState)
        g.add_node("agent", agent)
        g.add_edge(START, "agent")
        return g.compile(checkpointer=saver), {"messages": [HumanMessage(content="hi", id="h1")]}
    if name in ("react", "react_manual"):
        # LangGraph's prebuilt ReAct agent (`react_manual`: the same loop built by hand from a
        # model node, `ToolNode` and `tools_condition`), stopping before its tools, with a
        # scripted model: after a question it calls get_weather for the question's last word,
        # after the tool it answers "python: <the tool's words>".
        import warnings

        from langchain_core.language_models.chat_models import BaseChatModel
        from langchain_core.messages import AIMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration, ChatResult
        from langgraph.prebuilt import create_react_agent

        class Scripted(BaseChatModel):
            @property
            def _llm_type(self):
                return "scripted"

            def bind_tools(self, tools, **kwargs):
                return self

            def _generate(self, messages, stop=None, run_manager=None, **kwargs):
                last = messages[-1]
                if isinstance(last, ToolMessage):
                    msg = AIMessage(content=f"python: {last.content}")
                else:
                    city = str(last.content).rstrip("?").split()[-1]
                    n = len(messages)
                    msg = AIMessage(
                        content="",
                        tool_calls=[{"name": "get_weather", "args": {"city": city}, "id": f"py_call_{n}"}],
                    )
                return ChatResult(generations=[ChatGeneration(message=msg)])

        def get_weather(city: str) -> str:
            """Today's weather in a city."""
            return f"Sunny in {city}"

        if name == "react_manual":
            from langgraph.graph import MessagesState
            from langgraph.prebuilt import ToolNode, tools_condition

            model = Scripted().bind_tools([get_weather])
            g = StateGraph(MessagesState)
            g.add_node("agent", lambda state: {"messages": [model.invoke(state["messages"])]})
            g.add_node("tools", ToolNode([get_weather]))
            g.add_edge(START, "agent")
            g.add_conditional_edges("agent", tools_condition)
            g.add_edge("tools", "agent")
            return g.compile(checkpointer=saver, interrupt_before=["tools"]), None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            agent = create_react_agent(
                Scripted(), [get_weather], checkpointer=saver, interrupt_before=["tools"]
            )
        return agent, None
    if name == "hitl":
        def ask(s):
            answer = interrupt({"question": "approve?"})
            return {"log": [f"answer: {answer}"]}

        g = StateGraph(Route)
        g.add_node("ask", ask)
        g.add_edge(START, "ask")
        return g.compile(checkpointer=saver), {"log": [], "go_left": True}
    if name == "overwrite":
        g = StateGraph(Route)
        g.add_node("a", lambda s: {"log": ["a"]})
        g.add_node("b", lambda s: {"log": Overwrite(["b"])})
        g.add_node("c", lambda s: {"log": ["c"]})
        g.add_edge(START, "a")
        g.add_edge(START, "b")
        g.add_edge("a", "c")
        g.add_edge("b", "c")
        return g.compile(checkpointer=saver), {"log": [], "go_left": False}
    if name == "steps":
        g = StateGraph(Steps)
        g.add_node("count", lambda s: {"log": [f"{s['remaining']}:{s['last']}"]})
        g.add_edge(START, "count")
        g.add_conditional_edges("count", lambda s: "count" if s["remaining"] > 10002 else END)
        return g.compile(checkpointer=saver), {"log": []}
    if name in ("defer", "defer_join"):
        g = StateGraph(Route)
        for n in ["a", "b", "b2", "c", "d"]:
            g.add_node(n, (lambda n: lambda s: {"log": [n]})(n), defer=n == "d")
        g.add_edge(START, "a")
        g.add_edge("a", "b")
        g.add_edge("a", "c")
        g.add_edge("b", "b2")
        if name == "defer":
            g.add_edge("b2", "d")
            g.add_edge("c", "d")
        else:
            g.add_edge(["b2", "c"], "d")
        g.add_edge("d", END)
        return g.compile(checkpointer=saver), {"log": [], "go_left": False}
    if name == "command":
        g = StateGraph(Route)
        g.add_node("router", lambda s: Command(update={"log": ["router"]}, goto="right"))
        for n in ["left", "right"]:
            g.add_node(n, (lambda n: lambda s: {"log": [n]})(n))
        g.add_edge(START, "router")
        return g.compile(checkpointer=saver), {"log": [], "go_left": False}
    if name == "seed":
        g = StateGraph(Seed)
        g.add_node("node_a", lambda s: {"foo": "a", "bar": ["a"]})
        g.add_node("node_b", lambda s: {"foo": "b", "bar": ["b"]})
        g.add_edge(START, "node_a")
        g.add_edge("node_a", "node_b")
        g.add_edge("node_b", END)
        return g.compile(checkpointer=saver), {"foo": "", "bar": []}
    if name == "route":
        g = StateGraph(Route)
        for n in ["decide", "left", "right"]:
            g.add_node(n, (lambda n: lambda s: {"log": [n]})(n))
        g.add_edge(START, "decide")
        g.add_conditional_edges("decide", lambda s: "l" if s["go_left"] else "r", {"l": "left", "r": "right"})
        g.add_edge("left", END)
        g.add_edge("right", END)
        return g.compile(checkpointer=saver), {"log": [], "go_left": True}
    raise SystemExit(f"unknown graph {name}")


def snapshot(s):
    def cfg(c):
        if c is None:
            return None
        c = c["configurable"]
        return {k: c.get(k) for k in ("thread_id", "checkpoint_ns", "checkpoint_id")}

    return {
        "values": s.values,
        "next": list(s.next),
        "config": cfg(s.config),
        "metadata": s.metadata,
        "created_at": s.created_at,
        "parent_config": cfg(s.parent_config),
        "tasks": [
            {
                "id": t.id,
                "name": t.name,
                "error": t.error,
                "interrupts": [{"value": i.value, "id": i.id} for i in t.interrupts],
            }
            for t in s.tasks
        ],
        "interrupts": [{"value": i.value, "id": i.id} for i in s.interrupts],
    }


def main(db, graph_name, thread, actions):
    serde = None
    if os.environ.get("LANGGRAPH_AES_KEY"):
        from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

        serde = EncryptedSerializer.from_pycryptodome_aes()
    if db.startswith(("postgres://", "postgresql://")):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        conn = Connection.connect(db, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(conn, serde=serde)
        saver.setup()
    elif db.startswith(("mongodb://", "mongodb+srv://")):
        from langgraph.checkpoint.mongodb import MongoDBSaver
        from pymongo import MongoClient

        conn = MongoClient(db)
        db_name = conn.get_default_database("checkpointing_db").name
        saver = MongoDBSaver(conn, db_name=db_name, serde=serde)
    else:
        conn = sqlite3.connect(db, check_same_thread=False)
        saver = SqliteSaver(conn, serde=serde)
    graph, std_input = build(graph_name, saver)
    config = {"configurable": {"thread_id": thread}}
    out = {}
    for action in actions:
        if action == "run":
            graph.invoke(std_input, config)
        elif action == "resume":
            graph.invoke(None, config)
        elif action == "resume_yes":
            graph.invoke(Command(resume="yes"), config)
        elif action == "resume_yes_logged":
            graph.invoke(Command(resume="yes", update={"log": ["cmd"]}), config)
        elif action == "command_left":
            graph.invoke(Command(update={"log": ["cmd"]}, goto="left"), config)
        elif action.startswith("turns:"):
            for _ in range(int(action.split(":")[1])):
                have = graph.get_state(config).values.get("messages", [])
                graph.invoke({"messages": [chat_message("user", len(have) // 2)]}, config)
        elif action == "update":
            graph.update_state(config, {"foo": "upd", "bar": ["u"]})
        elif action == "update_as_a":
            graph.update_state(config, {"foo": "x"}, as_node="node_a")
        elif action == "end":
            graph.update_state(config, None, as_node=END)
        elif action.startswith("ask:"):
            graph.invoke({"messages": [{"role": "user", "content": action[4:]}]}, config)
        elif action == "agent_messages":
            out["agent_messages"] = [
                {
                    "type": m.type,
                    "content": m.content,
                    "tool_calls": [[c["name"], c["args"], c["id"]] for c in getattr(m, "tool_calls", [])],
                    "tool_call_id": getattr(m, "tool_call_id", None),
                }
                for m in graph.get_state(config).values["messages"]
            ]
            out["next"] = list(graph.get_state(config).next)
        elif action == "messages":
            out["messages"] = [
                [type(m).__name__, m.content, m.id] for m in graph.get_state(config).values["messages"]
            ]
        elif action == "history":
            out["history"] = [snapshot(s) for s in graph.get_state_history(config)]
        elif action == "outline":
            out["outline"] = [
                {
                    "step": s.metadata.get("step"),
                    "source": s.metadata.get("source"),
                    "next": list(s.next),
                    "channels": sorted(saver.get_tuple(s.config).checkpoint["channel_versions"]),
                    "writes": sorted(w[1] for w in (saver.get_tuple(s.config).pending_writes or [])),
                }
                for s in reversed(list(graph.get_state_history(config)))
            ]
        elif action == "state":
            out["state"] = snapshot(graph.get_state(config))
        else:
            raise SystemExit(f"unknown action {action}")
    conn.close()
    json.dump(out, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    if len(sys.argv) < 5:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:])
