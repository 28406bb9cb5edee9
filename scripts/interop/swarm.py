"""A swarm of two LangChain `create_agent`s built by `langgraph_swarm.create_swarm`, on a
SQLite file or a Postgres URL: the Python side of stategraph's swarm interop test.

Usage: python swarm.py DB THREAD ACTION...

The agents: `Alice` (system prompt "You are Alice.") with the tool `transfer_to_bob`, and
`Bob` ("You are Bob.") with `transfer_to_alice` (`langgraph_swarm.create_handoff_tool`);
`Alice` is the default active agent. The scripted model: an agent whose last message is
from the user and names the other agent calls its handoff tool, with the id `call_<number
of messages it was sent>`; otherwise it answers "<its name in lower case>: <the last user
message>".

ACTIONS: `ask:TEXT`, `dump` (as create_agent.py's, each checkpoint also with its
`active_agent`).
"""

import json
import sys
import warnings

from create_agent import dump, open_saver
from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph_swarm import create_handoff_tool, create_swarm


class Scripted(BaseChatModel):
    @property
    def _llm_type(self):
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        me = "Alice" if str(messages[0].content) == "You are Alice." else "Bob"
        other = "Bob" if me == "Alice" else "Alice"
        last_user = next(str(m.content) for m in reversed(messages) if isinstance(m, HumanMessage))
        if isinstance(messages[-1], HumanMessage) and other in last_user:
            msg = AIMessage(
                content="",
                tool_calls=[
                    {"name": f"transfer_to_{other.lower()}", "args": {}, "id": f"call_{len(messages)}"}
                ],
            )
        else:
            msg = AIMessage(content=f"{me.lower()}: {last_user}")
        return ChatResult(generations=[ChatGeneration(message=msg)])


def main(db, thread, actions):
    conn, saver = open_saver(db)
    model = Scripted()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        alice = create_agent(
            model, [create_handoff_tool(agent_name="Bob")], system_prompt="You are Alice.", name="Alice"
        )
        bob = create_agent(
            model, [create_handoff_tool(agent_name="Alice")], system_prompt="You are Bob.", name="Bob"
        )
    graph = create_swarm([alice, bob], default_active_agent="Alice").compile(checkpointer=saver)
    config = {"configurable": {"thread_id": thread}}
    out = {}
    for action in actions:
        kind, _, arg = action.partition(":")
        if kind == "ask":
            graph.invoke({"messages": [{"role": "user", "content": arg}]}, config)
        elif kind == "dump":
            out["history"] = dump(graph, saver, config)
            states = reversed(list(graph.get_state_history(config)))
            for entry, state in zip(out["history"], states):
                entry["active_agent"] = state.values.get("active_agent")
        else:
            raise SystemExit(f"unknown action {action}")
    conn.close()
    json.dump(out, sys.stdout, ensure_ascii=False, default=str)


if __name__ == "__main__":
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2], sys.argv[3:])
