"""Call MCP tools the way Python agents do, through langchain-mcp-adapters, and print the
tool messages they make, as JSON.

Usage: python mcp_adapters_call.py COMMAND [ARG...] < CALLS.json

Runs with the venv `scripts/mcp-servers.sh` makes (`adapters/bin/python`). COMMAND ARG... start
one MCP server over stdio; CALLS.json is a list of LangChain tool calls
(`{"name", "args", "id"}`). Each call goes through the tool `load_mcp_tools` made, as
LangGraph's ToolNode invokes it (a `tool_call` input), with the adapters' default error
handling; the output is the list of `ToolMessage.model_dump()`s, in the calls' order.
"""

import asyncio
import json
import sys

from langchain_mcp_adapters.client import MultiServerMCPClient


async def main():
    calls = json.load(sys.stdin)
    client = MultiServerMCPClient(
        {"server": {"transport": "stdio", "command": sys.argv[1], "args": sys.argv[2:]}}
    )
    tools = {t.name: t for t in await client.get_tools()}
    out = []
    for call in calls:
        message = await tools[call["name"]].ainvoke({"type": "tool_call", **call})
        out.append(message.model_dump())
    json.dump(out, sys.stdout)


asyncio.run(main())
