"""Two LangChain `create_agent`s as nodes of one LangGraph graph, the first handing the
conversation to the second with a handoff tool (`Command(goto="billing",
graph=Command.PARENT)`), on a SQLite file or a Postgres URL: the Python side of
stategraph's handoff interop test.

Usage: python handoff.py DB THREAD ACTION...

The graph (over `MessagesState`): START → triage; triage → END; billing → END. `triage` is an
agent whose only tool is `transfer_to_billing` (the same tool as stategraph's
`create_handoff_tool("billing")`: it answers "Successfully transferred to billing" with
`response_metadata={"__handoff_destination": "billing"}` and sends the conversation to the
`billing` node). The scripted model: the triage agent (system prompt "You are triage.")
calls `transfer_to_billing` after a user message, with the id `call_<number of messages it
was sent>`, and otherwise answers "triage: done"; the billing agent answers
"billing: <the last user message>".

ACTIONS: `ask:TEXT`, `dump` (as create_agent.py's).
"""

import json
import sys
import warnings
from typing import Annotated

from create_agent import dump, open_saver
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import InjectedState
from langgraph.types import Command


class Scripted(BaseChatModel):
    @property
    def _llm_type(self):
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        system = str(messages[0].content)
        last_user = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
        if system == "You are billing.":
            msg = AIMessage(content=f"billing: {last_user}")
        elif isinstance(messages[-1], HumanMessage):
            msg = AIMessage(
                content="",
                tool_calls=[{"name": "transfer_to_billing", "args": {}, "id": f"call_{len(messages)}"}],
            )
        else:
            msg = AIMessage(content="triage: done")
        return ChatResult(generations=[ChatGeneration(message=msg)])


@tool("transfer_to_billing", description="Ask agent 'billing' for help")
def transfer_to_billing(
    state: Annotated[dict, InjectedState], tool_call_id: Annotated[str, InjectedToolCallId]
):
    answer = ToolMessage(
        content="Successfully transferred to billing",
        name="transfer_to_billing",
        tool_call_id=tool_call_id,
        response_metadata={"__handoff_destination": "billing"},
    )
    return Command(goto="billing", graph=Command.PARENT, update={"messages": state["messages"] + [answer]})


def main(db, thread, actions):
    conn, saver = open_saver(db)
    model = Scripted()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        triage = create_agent(model, [transfer_to_billing], system_prompt="You are triage.")
        billing = create_agent(model, [], system_prompt="You are billing.")
    g = StateGraph(MessagesState)
    g.add_node("triage", triage, destinations=("billing",))
    g.add_node("billing", billing)
    g.add_edge(START, "triage")
    g.add_edge("triage", END)
    g.add_edge("billing", END)
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}}
    out = {}
    for action in actions:
        kind, _, arg = action.partition(":")
        if kind == "ask":
            graph.invoke({"messages": [{"role": "user", "content": arg}]}, config)
        elif kind == "dump":
            out["history"] = dump(graph, saver, config)
        else:
            raise SystemExit(f"unknown action {action}")
    conn.close()
    json.dump(out, sys.stdout, ensure_ascii=False, default=str)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
