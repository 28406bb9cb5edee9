"""Reference graphs served by the Python `langgraph dev` server (see ../README.md).

stategraph's SDK tests serve the same graphs written in Rust
(`crates/stategraph-tests/tests/common/seed_server.rs`).

`seed`: START -> node_a -> node_b -> END over a state with `foo` (last value wins)
and `bar` (list, appended with operator.add).

`chat`: START -> agent -> approve -> END over `messages` (add_messages). `agent` answers the
last message with an AI message `echo: <content>` (id `ai-<n>`, n = messages so far);
`approve` asks `interrupt({"question": "send?", "draft": <that content>})` and adds an AI
message `sent` (answer "yes") or `dropped` (id `ai-<n>`).

`fanout`: a conditional edge from START sends one `Send("worker", {"item": i})` per item of
`items`; each worker adds `[item * 10]` to `done` (operator.add).

`slow`: START -> wait -> END over the seed state; `wait` sleeps 1 s, then adds `["slow"]` to
`bar`.

`nested`: START -> sub -> after -> END over `log` (operator.add), where `sub` is a compiled
subgraph inner_a -> inner_b; each node adds its name to `log`.

`workflow`: an entrypoint (the Functional API) of `{"topics": [...]}`. It drafts every topic
in parallel (task `draft`: `"draft about <topic>"`), asks
`interrupt({"question": "publish?", "drafts": <the drafts>})`, and on `"yes"` polishes each
draft (task `polish`: upper case) and returns `{"published": <polished>, "count": n}`, saving
`n` (1 + the count saved by the thread's previous run); on any other answer it returns
`{"published": [], "count": <previous count>}` and saves the previous count.
"""

import asyncio
import operator
from typing import Annotated

from typing_extensions import TypedDict

from langchain_core.messages import AIMessage
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send, interrupt


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


class Chat(TypedDict):
    messages: Annotated[list, add_messages]


def agent(state: Chat) -> dict:
    last = state["messages"][-1]
    n = len(state["messages"])
    return {"messages": [AIMessage(content=f"echo: {last.content}", id=f"ai-{n}")]}


def approve(state: Chat) -> dict:
    draft = state["messages"][-1].content
    answer = interrupt({"question": "send?", "draft": draft})
    n = len(state["messages"])
    text = "sent" if answer == "yes" else "dropped"
    return {"messages": [AIMessage(content=text, id=f"ai-{n}")]}


chat_builder = StateGraph(Chat)
chat_builder.add_node("agent", agent)
chat_builder.add_node("approve", approve)
chat_builder.add_edge(START, "agent")
chat_builder.add_edge("agent", "approve")
chat_builder.add_edge("approve", END)
chat = chat_builder.compile()


class Fan(TypedDict):
    items: list[int]
    done: Annotated[list[int], operator.add]


def worker(arg: dict) -> dict:
    return {"done": [arg["item"] * 10]}


fan_builder = StateGraph(Fan)
fan_builder.add_node("worker", worker)
fan_builder.add_conditional_edges(
    START, lambda s: [Send("worker", {"item": i}) for i in s["items"]], ["worker"]
)
fan_builder.add_edge("worker", END)
fanout = fan_builder.compile()


async def wait(state: State) -> dict:
    await asyncio.sleep(1.0)
    return {"bar": ["slow"]}


slow_builder = StateGraph(State)
slow_builder.add_node("wait", wait)
slow_builder.add_edge(START, "wait")
slow_builder.add_edge("wait", END)
slow = slow_builder.compile()


class Log(TypedDict):
    log: Annotated[list[str], operator.add]


def _logger(name: str):
    def node(state: Log) -> dict:
        return {"log": [name]}

    return node


inner_builder = StateGraph(Log)
inner_builder.add_node("inner_a", _logger("inner_a"))
inner_builder.add_node("inner_b", _logger("inner_b"))
inner_builder.add_edge(START, "inner_a")
inner_builder.add_edge("inner_a", "inner_b")
inner_builder.add_edge("inner_b", END)

nested_builder = StateGraph(Log)
nested_builder.add_node("sub", inner_builder.compile())
nested_builder.add_node("after", _logger("after"))
nested_builder.add_edge(START, "sub")
nested_builder.add_edge("sub", "after")
nested_builder.add_edge("after", END)
nested = nested_builder.compile()


@task
def draft(topic: str) -> str:
    return f"draft about {topic}"


@task
def polish(text: str) -> str:
    return text.upper()


@entrypoint()
def workflow(request: dict, *, previous: int | None = None):
    drafts = [f.result() for f in [draft(t) for t in request["topics"]]]
    answer = interrupt({"question": "publish?", "drafts": drafts})
    count = previous or 0
    if answer != "yes":
        return entrypoint.final(value={"published": [], "count": count}, save=count)
    published = [f.result() for f in [polish(d) for d in drafts]]
    return entrypoint.final(value={"published": published, "count": count + 1}, save=count + 1)


# `approval`: LangChain's `create_agent` with a tool `get_weather` ("Sunny in CITY") gated by
# `HumanInTheLoopMiddleware`, on a scripted model: after a user message it calls
# `get_weather` for the message's last word (id `call_<number of messages it was sent>`);
# after a tool message it answers "answer: <the last line of the tool message>".
from langchain.agents import create_agent  # noqa: E402
from langchain.agents.middleware import HumanInTheLoopMiddleware  # noqa: E402
from langchain_core.language_models.chat_models import BaseChatModel  # noqa: E402
from langchain_core.messages import ToolMessage  # noqa: E402
from langchain_core.outputs import ChatGeneration, ChatResult  # noqa: E402


class _Scripted(BaseChatModel):
    @property
    def _llm_type(self):
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        last = messages[-1]
        text = str(last.content)
        if isinstance(last, ToolMessage):
            msg = AIMessage(content=f"answer: {text.splitlines()[-1] if text else ''}")
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


approval = create_agent(
    _Scripted(),
    [get_weather],
    middleware=[HumanInTheLoopMiddleware(interrupt_on={"get_weather": True})],
)
