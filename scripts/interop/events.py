"""Python LangGraph's prebuilt ReAct agent, streamed with `astream_events(version="v2")`.

Usage: events.py BASE_URL

The agent is `create_react_agent` with LangChain's `ChatOpenAI` (model "replay") talking to
the OpenAI-compatible server at BASE_URL and one tool, `get_weather` ("Sunny in CITY"). It is
asked "Weather in Paris?" on thread "events", with run metadata {"m": 1} and tags ["mytag"].
Prints the events as one JSON list, each event as LangChain yields it with its data made
JSON: messages as their `model_dump()`, `Send`s as {"node", "arg"}, interrupts as dicts,
tuples as lists.
"""

import asyncio
import json
import sys
import warnings

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.types import Interrupt, Send


def get_weather(city: str) -> str:
    """Today's weather in a city."""
    return f"Sunny in {city}"


def plain(v):
    if isinstance(v, BaseMessage):
        return plain(v.model_dump())
    if isinstance(v, Send):
        return {"node": v.node, "arg": plain(v.arg)}
    if isinstance(v, Interrupt):
        return {"value": plain(v.value), "id": v.id}
    if isinstance(v, dict):
        return {str(k): plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if v is None or isinstance(v, (str, int, float, bool)):
        return v
    return repr(v)


async def main(base_url):
    # Asking for token usage, as stategraph's model does by default.
    model = ChatOpenAI(model="replay", base_url=base_url, api_key="none", stream_usage=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        agent = create_react_agent(model, [get_weather], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "events"}, "metadata": {"m": 1}, "tags": ["mytag"]}
    question = {"messages": [HumanMessage(content="Weather in Paris?", id="q1")]}
    events = []
    async for e in agent.astream_events(question, config, version="v2"):
        events.append(plain(dict(e)))
    print(json.dumps(events))


asyncio.run(main(sys.argv[1]))
