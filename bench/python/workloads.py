"""Graph builders for the benchmark workloads (see ../WORKLOADS.md), in Python LangGraph.

Each `build_*` function returns an uncompiled `StateGraph`; `run.py` compiles it with (or
without) a checkpointer. The graphs follow the workload definitions in WORKLOADS.md, which in
turn follow the graphs of LangGraph's own `libs/langgraph/bench` suite (`sequential`,
`wide_state`, `react_agent`, `fanout_to_subgraph`).

Everything here is plain synchronous code: the benchmark drives the graphs with
`graph.invoke`. (No `from __future__ import annotations`: state schemas built inside
functions, like the chat one, need their `Annotated[...]` evaluated where they are defined.)
"""

import operator
import random
import string
import warnings
from dataclasses import dataclass, field
from functools import partial
from typing import Annotated, Any, Optional
from uuid import uuid4

from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict


def random_text(k: int) -> str:
    """`k` random lowercase ASCII letters (the workloads' "random text")."""
    return "".join(random.choices(string.ascii_lowercase, k=k))


# --------------------------------------------------------------------------------------------
# linear: START → node_0 → … → node_{n-1} → END


class LinearState(TypedDict, total=False):
    items: Annotated[list[str], operator.add]
    counter: int


def build_linear(n: int) -> StateGraph:
    def make_node(i: int):
        def node(state: LinearState) -> dict:
            return {"items": [f"item {i}"], "counter": i}

        return node

    builder = StateGraph(LinearState)
    prev = START
    for i in range(n):
        name = f"node_{i}"
        builder.add_node(name, make_node(i))
        builder.add_edge(prev, name)
        prev = name
    builder.add_edge(prev, END)
    return builder


# --------------------------------------------------------------------------------------------
# fanout: START → fan → worker_0 ‖ … ‖ worker_{n-1} → join → END


class FanoutState(TypedDict, total=False):
    topic: str
    results: Annotated[list[str], operator.add]


def build_fanout(n: int) -> StateGraph:
    def fan(state: FanoutState) -> dict:
        return {"topic": "fanned"}

    def make_worker(i: int):
        def worker(state: FanoutState) -> dict:
            return {"results": [f"result {i}"]}

        return worker

    def join(state: FanoutState) -> dict:
        return {"topic": f"joined {len(state.get('results', []))}"}

    builder = StateGraph(FanoutState)
    builder.add_node("fan", fan)
    builder.add_node("join", join)
    builder.add_edge(START, "fan")
    workers = [f"worker_{i}" for i in range(n)]
    for i, name in enumerate(workers):
        builder.add_node(name, make_worker(i))
        builder.add_edge("fan", name)
    # One join edge waiting for all workers (not n separate edges).
    builder.add_edge(workers, "join")
    builder.add_edge("join", END)
    return builder


# --------------------------------------------------------------------------------------------
# chat (and history): START → reply → END over an append-only `messages: list[str]`


def concat_batches(state: list, writes: list) -> list:
    """DeltaChannel reducer: append every write (each a list of messages) to the state.

    A DeltaChannel reducer receives the current value and a *batch* of writes in one call
    (`reducer(state, [w1, w2, …])`), so a bare `operator.add` would append each write list as
    one nested element. This is the batch form of `operator.add` on lists: it is
    batching-invariant, as DeltaChannel requires, and yields the same flat `list[str]` as the
    non-delta channel.
    """
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


def build_chat(ai_messages, delta: bool, snapshot_every: int) -> StateGraph:
    """The chat graph; `ai_messages` is an iterator of pre-generated AI replies.

    The replies are generated before the timed turns so that the timed region holds only
    the graph's own work.
    """
    if delta:
        from langgraph.channels.delta import DeltaChannel

        class ChatState(TypedDict):
            messages: Annotated[list, DeltaChannel(concat_batches, snapshot_frequency=snapshot_every)]

    else:

        class ChatState(TypedDict):  # type: ignore[no-redef]
            messages: Annotated[list[str], operator.add]

    def reply(state: ChatState) -> dict:
        return {"messages": [next(ai_messages)]}

    builder = StateGraph(ChatState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder


# --------------------------------------------------------------------------------------------
# sequential_1000: n no-op nodes in a chain over MessagesState (LangGraph's `sequential`)


def build_sequential(n: int) -> StateGraph:
    def noop(state: MessagesState) -> None:
        return None

    builder = StateGraph(MessagesState)
    prev = START
    for i in range(n):
        name = f"node_{i}"
        builder.add_node(name, noop)
        builder.add_edge(prev, name)
        prev = name
    builder.add_edge(prev, END)
    return builder


# --------------------------------------------------------------------------------------------
# wide_state_15x600: LangGraph's `wide_state` graph (a 15-field dataclass state)

_WIDE_LIST_FIELDS = frozenset(
    {"messages", "trigger_events", "categorizations", "responses", "memory_docs", "relevant_rules"}
)
_WIDE_DICT_FIELDS = frozenset(
    {"user_info", "crm_info", "slack_participants", "notified_assignees", "autoresponse", "issue"}
)


@dataclass(kw_only=True)
class WideState:
    messages: Annotated[list, operator.add] = field(default_factory=list)
    trigger_events: Annotated[list, operator.add] = field(default_factory=list)
    primary_issue_medium: Annotated[str, lambda x, y: y or x] = field(default="email")
    autoresponse: Annotated[Optional[dict], lambda _, y: y] = field(default=None)
    issue: Annotated[Optional[dict], lambda x, y: y if y else x] = field(default=None)
    relevant_rules: Optional[list[dict]] = field(default=None)
    memory_docs: Optional[list[dict]] = field(default=None)
    categorizations: Annotated[list[dict], operator.add] = field(default_factory=list)
    responses: Annotated[list[dict], operator.add] = field(default_factory=list)
    user_info: Annotated[Optional[dict], lambda x, y: y if y is not None else x] = field(default=None)
    crm_info: Annotated[Optional[dict], lambda x, y: y if y is not None else x] = field(default=None)
    email_thread_id: Annotated[Optional[str], lambda x, y: y if y is not None else x] = field(
        default=None
    )
    slack_participants: Annotated[dict, operator.or_] = field(default_factory=dict)
    bot_id: Optional[str] = field(default=None)
    notified_assignees: Annotated[dict, operator.or_] = field(default_factory=dict)


def wide_state_input() -> dict:
    """The wide_state input of WORKLOADS.md: one message, a 3×5 nested dict."""
    return {
        "messages": [
            {
                str(i) * 10: {
                    str(j) * 10: ["hi?" * 10, True, 1, 6327816386138, None] * 5 for j in range(5)
                }
                for i in range(3)
            }
        ]
    }


def build_wide_state(n: int) -> StateGraph:
    def read_write(read: str, writes: list[str], state: WideState) -> dict:
        """Read one field and write it (shaped per target field) to each of `writes`.

        List fields get the value as a list, dict fields a single element of it, and the
        other (string) fields n random letters — as upstream's helper does.
        """
        val = getattr(state, read)
        if isinstance(val, str):
            val = {val: val}
        single = val[-1] if isinstance(val, list) else val
        as_list = val if isinstance(val, list) else [val]
        out = {}
        for key in writes:
            if key in _WIDE_LIST_FIELDS:
                out[key] = as_list
            elif key in _WIDE_DICT_FIELDS:
                out[key] = single
            else:
                out[key] = random_text(n)
        return out

    builder = StateGraph(WideState)
    builder.add_node("one", partial(read_write, "messages", ["trigger_events", "primary_issue_medium"]))
    builder.add_node("two", partial(read_write, "trigger_events", ["autoresponse", "issue"]))
    builder.add_node("three", partial(read_write, "autoresponse", ["relevant_rules"]))
    builder.add_node(
        "four",
        partial(read_write, "trigger_events", ["categorizations", "responses", "memory_docs"]),
    )
    builder.add_node(
        "five",
        partial(
            read_write,
            "categorizations",
            [
                "user_info",
                "crm_info",
                "email_thread_id",
                "slack_participants",
                "bot_id",
                "notified_assignees",
            ],
        ),
    )
    builder.add_node("six", partial(read_write, "responses", ["messages"]))
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", "three")
    builder.add_edge("two", "four")
    builder.add_edge(["three", "four"], "five")
    builder.add_edge("five", "six")
    builder.add_conditional_edges("six", lambda state: END if len(state.messages) > n else "one")
    return builder


# --------------------------------------------------------------------------------------------
# react_agent_100x: LangGraph's prebuilt ReAct agent with a scripted fake model and one tool


def build_react_agent(n: int, checkpointer):
    """A compiled `create_react_agent` graph (the prebuilt compiles it itself).

    The model answers its i-th call with one tool call for i < n and with a final
    `AIMessage("answer" * 100)` at i = n, then starts over, so every invoke sees the same
    sequence of n tool rounds.
    """
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool

    with warnings.catch_warnings():
        # create_react_agent is deprecated in LangGraph 1.x (moved to langchain.agents),
        # but it is the graph the workload specifies.
        warnings.simplefilter("ignore")
        from langgraph.prebuilt import create_react_agent

    class ScriptedChatModel(FakeMessagesListChatModel):
        """Returns `responses` in order (a copy of each), cycling; ignores bound tools."""

        def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            response = self.responses[self.i].model_copy()
            self.i = self.i + 1 if self.i < len(self.responses) - 1 else 0
            return ChatResult(generations=[ChatGeneration(message=response)])

    tool = StructuredTool.from_function(
        lambda query: f"result for query: {query}" * 10,
        name="search",
        description="",
    )
    responses = [
        AIMessage(
            content="",
            tool_calls=[
                {"id": str(uuid4()), "name": tool.name, "args": {"query": str(uuid4()) * 100}}
            ],
            id=str(uuid4()),
        )
        for _ in range(n)
    ]
    responses.append(AIMessage(content="answer" * 100, id=str(uuid4())))
    model = ScriptedChatModel(responses=responses)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_react_agent(model, [tool], checkpointer=checkpointer)


# --------------------------------------------------------------------------------------------
# create_agent_20x: LangChain's create_agent with three middleware, a scripted model, one tool


def build_create_agent(n: int, checkpointer):
    """`create_agent` with `ModelCallLimitMiddleware` and `ToolCallLimitMiddleware` (limits
    of 10^9, never reached) and `SummarizationMiddleware` (a token trigger of 10^9: it counts
    the conversation before each model call, and never summarizes); the model asks for n tool
    calls, then answers, as in `react_agent_100x`."""
    from langchain.agents import create_agent
    from langchain.agents.middleware import (
        ModelCallLimitMiddleware,
        SummarizationMiddleware,
        ToolCallLimitMiddleware,
    )
    from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import StructuredTool

    class ScriptedChatModel(FakeMessagesListChatModel):
        def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedChatModel":
            return self

        def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
            response = self.responses[self.i].model_copy()
            self.i = self.i + 1 if self.i < len(self.responses) - 1 else 0
            return ChatResult(generations=[ChatGeneration(message=response)])

    tool = StructuredTool.from_function(
        lambda query: f"result for query: {query}" * 10, name="search", description=""
    )
    responses = [
        AIMessage(
            content="",
            tool_calls=[{"id": str(uuid4()), "name": "search", "args": {"query": str(uuid4()) * 100}}],
            id=str(uuid4()),
        )
        for _ in range(n)
    ]
    responses.append(AIMessage(content="answer" * 100, id=str(uuid4())))
    model = ScriptedChatModel(responses=responses)
    never = 10**9
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return create_agent(
            model,
            [tool],
            middleware=[
                ModelCallLimitMiddleware(thread_limit=never),
                ToolCallLimitMiddleware(thread_limit=never),
                SummarizationMiddleware(model, trigger=("tokens", never)),
            ],
            checkpointer=checkpointer,
        )


# --------------------------------------------------------------------------------------------
# fanout_to_subgraph_100x: one Send per subject into a compiled joke subgraph


class OverallState(TypedDict, total=False):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]


class JokeInput(TypedDict):
    subject: str


class JokeOutput(TypedDict):
    jokes: list[str]


class JokeState(JokeInput, JokeOutput):
    pass


def build_fanout_to_subgraph() -> StateGraph:
    def edit(state: JokeInput) -> dict:
        return {"subject": f"{state['subject']} - hohoho"}

    def generate(state: JokeInput) -> dict:
        return {"jokes": [f"Joke about {state['subject']}"]}

    def bump(state: JokeOutput) -> dict:
        return {"jokes": [state["jokes"][0] + " a"]}

    def bump_loop(state: JokeOutput) -> str:
        return END if state["jokes"][0].endswith(" a" * 10) else "bump"

    sub = StateGraph(JokeState, input_schema=JokeInput, output_schema=JokeOutput)
    sub.add_node("edit", edit)
    sub.add_node("generate", generate)
    sub.add_node("bump", bump)
    sub.set_entry_point("edit")
    sub.add_edge("edit", "generate")
    sub.add_edge("generate", "bump")
    sub.add_conditional_edges("bump", bump_loop)
    sub.set_finish_point("generate")
    joke_graph = sub.compile()

    def continue_to_jokes(state: OverallState) -> list[Send]:
        return [Send("generate_joke", {"subject": s}) for s in state["subjects"]]

    builder = StateGraph(OverallState)
    builder.add_node("generate_joke", joke_graph)
    builder.add_conditional_edges(START, continue_to_jokes)
    builder.add_edge("generate_joke", END)
    return builder


def build_functional(saver):
    """functional_50: an entrypoint starting one `work` task per item, then joining them."""
    from langgraph.func import entrypoint, task

    @task
    def work(i: int) -> str:
        return f"result {i}"

    @entrypoint(checkpointer=saver)
    def wf(n: int) -> list:
        futures = [work(i) for i in range(n)]
        return [f.result() for f in futures]

    return wf
