"""MCP servers as tool sources: the client side (config/mcp.yaml → skillyard tools)."""
