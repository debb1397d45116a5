"""The service's routers, one module each: tools, agent, runs, admin, MCP."""
