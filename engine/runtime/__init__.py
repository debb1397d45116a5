"""The runtime: a call's life (Run, events, context, result, deadlines), the linked Project, the router, the agent loop, and the contracts (contracts.py) every tool type and skill kind implements."""
