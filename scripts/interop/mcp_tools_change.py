"""An MCP server, on the official Python SDK, whose tool list changes when asked: for the
MCP client's test that the list is read again after `notifications/tools/list_changed`.

Usage: python mcp_tools_change.py   (stdio; run with the venv `scripts/mcp-servers.sh` makes,
`servers/bin/python`)

It starts with one tool, `unlock`; calling it adds the tool `secret` and announces the change
before it answers: `notifications/tools/list_changed` on a session of a protocol version with
`initialize` (up to 2025-11-25), and to `subscriptions/listen` subscribers on later ones.
"""

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("tools-change")


def secret() -> str:
    """Tells the secret."""
    return "the secret is 42"


@server.tool()
async def unlock(ctx: Context) -> str:
    """Adds the tool `secret`."""
    server.add_tool(secret, name="secret")
    await ctx.notify_tools_changed()
    await ctx.session.send_tool_list_changed()
    return "unlocked"


server.run()
