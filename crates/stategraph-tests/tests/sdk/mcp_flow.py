"""The official MCP Python client against a server's `/mcp/` endpoint: it connects over
streamable HTTP (with the API key as `x-api-key`), lists the tools (one per assistant) and
calls two of them, once with arguments that run and once with a graph that fails.

Usage: python mcp_flow.py BASE_URL API_KEY; prints a transcript as JSON."""

import asyncio
import json
import sys

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

base, key = sys.argv[1], sys.argv[2]


def text_of(result):
    return [c.text for c in result.content if getattr(c, "type", None) == "text"]


async def main():
    out = {}
    async with httpx2.AsyncClient(
        headers={"x-api-key": key}, timeout=httpx2.Timeout(60, read=300)
    ) as http:
        async with Client(streamable_http_client(base + "/mcp/", http_client=http)) as c:
            out["server"] = c.server_info.name
            tools = (await c.list_tools()).tools
            out["tools"] = {
                t.name: {
                    "title": t.title,
                    "description": t.description,
                    "input_schema": t.input_schema,
                }
                for t in tools
            }
            seed = await c.call_tool("seed", {"foo": "", "bar": []})
            out["seed"] = {"is_error": bool(seed.is_error), "text": text_of(seed)}
            chat = await c.call_tool("chat", {"messages": "hello"})
            out["chat"] = {"is_error": bool(chat.is_error), "text": text_of(chat)}
            boom = await c.call_tool("boom", {})
            out["boom"] = {"is_error": bool(boom.is_error), "text": text_of(boom)}
            try:
                await c.call_tool("nobody", {})
                out["unknown"] = "answered"
            except Exception as e:  # the SDK raises the JSON-RPC error
                out["unknown"] = str(e)
    # Without the key, the endpoint is refused.
    async with httpx2.AsyncClient(timeout=30) as http:
        r = await http.post(
            base + "/mcp/",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"accept": "application/json, text/event-stream"},
        )
        out["without_key"] = r.status_code
    print(json.dumps(out))


asyncio.run(main())
