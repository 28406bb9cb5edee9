"""LangChain's `create_agent` with the human-in-the-loop and summarization middlewares, on a
SQLite file or a Postgres URL, with a scripted model: the Python side of stategraph's
`create_agent` interop test.

Usage: python create_agent.py DB THREAD ACTION...

The agent: tool `get_weather` ("Sunny in CITY"); `HumanInTheLoopMiddleware` gating it;
`SummarizationMiddleware(trigger=("messages", 8), keep=("messages", 3),
summary_prompt="SUMMARIZE:\\n{messages}")`. The scripted model: a summary request (a prompt
starting `SUMMARIZE:`) is answered "They asked about the weather."; after a tool message it
answers "answer: <the last line of the tool message>"; otherwise it calls get_weather for the question's last
word with the id `call_<number of messages it was sent>`.

ACTIONS: `ask:TEXT`, `approve`, `edit:CITY` (run get_weather for CITY instead), `reject`,
`reject:REASON`, `respond:TEXT`, `dump` (print the thread's history, oldest first, with ids
left out: per checkpoint its step, source, next, messages, interrupts, channel names and
the channels of its pending writes).
"""

import json
import sqlite3
import sys
import warnings

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, SummarizationMiddleware
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.types import Command


class Scripted(BaseChatModel):
    @property
    def _llm_type(self):
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        last = messages[-1]
        text = str(last.content)
        if text.startswith("SUMMARIZE:"):
            msg = AIMessage(content="They asked about the weather.")
        elif isinstance(last, ToolMessage):
            msg = AIMessage(content=f"answer: {text.split(chr(10))[-1]}")
        else:
            city = text.rstrip("?").split()[-1]
            msg = AIMessage(
                content="",
                tool_calls=[{"name": "get_weather", "args": {"city": city}, "id": f"call_{len(messages)}"}],
            )
        return ChatResult(generations=[ChatGeneration(message=msg)])


def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"Sunny in {city}"


def message(m):
    return {
        "type": m.type,
        "content": m.content,
        "name": m.name,
        "tool_calls": [[c["name"], c["args"], c["id"]] for c in getattr(m, "tool_calls", [])],
        "tool_call_id": getattr(m, "tool_call_id", None),
        "status": getattr(m, "status", None),
        "additional_kwargs": m.additional_kwargs,
        "response_metadata": m.response_metadata if m.type == "tool" else None,
    }


def open_saver(db):
    """A LangGraph saver on a SQLite file or a Postgres URL, and its connection."""
    if db.startswith(("postgres://", "postgresql://")):
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        conn = Connection.connect(db, autocommit=True, prepare_threshold=0, row_factory=dict_row)
        saver = PostgresSaver(conn)
        saver.setup()
        return conn, saver
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(db, check_same_thread=False)
    return conn, SqliteSaver(conn)


def dump(graph, saver, config):
    """The thread's history, oldest first, ids left out."""
    history = []
    for s in reversed(list(graph.get_state_history(config))):
        raw = saver.get_tuple(s.config)
        history.append(
            {
                "step": s.metadata.get("step"),
                "source": s.metadata.get("source"),
                "next": list(s.next),
                "messages": [message(m) for m in s.values.get("messages", [])],
                "keys": sorted(k for k in s.values if k != "messages"),
                "interrupts": [i.value for t in s.tasks for i in t.interrupts],
                "channels": sorted(raw.checkpoint["channel_versions"]),
                "writes": sorted(w[1] for w in (raw.pending_writes or [])),
            }
        )
    return history


def main(db, thread, actions):
    conn, saver = open_saver(db)
    model = Scripted()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_agent(
            model,
            [get_weather],
            middleware=[
                HumanInTheLoopMiddleware(interrupt_on={"get_weather": True}),
                SummarizationMiddleware(
                    model,
                    trigger=("messages", 8),
                    keep=("messages", 3),
                    summary_prompt="SUMMARIZE:\n{messages}",
                ),
            ],
            checkpointer=saver,
        )
    config = {"configurable": {"thread_id": thread}}
    out = {}
    for action in actions:
        kind, _, arg = action.partition(":")
        if kind == "ask":
            agent.invoke({"messages": [{"role": "user", "content": arg}]}, config)
        elif kind == "approve":
            agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
        elif kind == "edit":
            decision = {"type": "edit", "edited_action": {"name": "get_weather", "args": {"city": arg}}}
            agent.invoke(Command(resume={"decisions": [decision]}), config)
        elif kind == "reject":
            decision = {"type": "reject", **({"message": arg} if arg else {})}
            agent.invoke(Command(resume={"decisions": [decision]}), config)
        elif kind == "respond":
            agent.invoke(Command(resume={"decisions": [{"type": "respond", "message": arg}]}), config)
        elif kind == "dump":
            out["history"] = dump(agent, saver, config)
        else:
            raise SystemExit(f"unknown action {action}")
    conn.close()
    json.dump(out, sys.stdout, ensure_ascii=False, default=str)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
