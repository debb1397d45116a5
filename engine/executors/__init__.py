"""Executors: what runs when the router lets a call through (the workflow executor and its nodes, python tools, fetch); the ToolType contract they implement is in runtime/contracts.py."""
