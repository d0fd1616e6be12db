"""MCP server: Ultron's tools for any MCP client, over stdio (`ultron mcp`) or streamable HTTP (`/mcp`)."""
