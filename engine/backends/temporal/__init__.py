"""The Temporal backend: tool calls as Temporal workflow executions, steps as activities.

- config.py     the execution.temporal settings, resolved (env wins), and what they require
- revision.py   the revision of a linked project (what a worker serves)
- protocol.py   what travels between front door, workflow and activities (plain JSON)
- workflows.py  the workflow: steps in order, mapping, retries, event numbering (deterministic)
- activities.py a step's skill, and writing events to the store (on the worker)
- worker.py     `skillyard worker`: a Temporal worker for one project revision
- single.py     a tool that is not a workflow: one activity in a one-activity workflow
- client.py     the front door's side: start an execution, follow its events from the store
- orphans.py    a worker adopts the runs whose front door died, and writes their end
- agent_*.py    the agent loop as a workflow: its protocol, workflow, activities, front door

temporalio is imported only by these modules, and they only when the backend is used.
"""
