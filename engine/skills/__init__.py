"""Skills: the units of work a workflow step runs (prompt, python, template, tool); the Skill contract is in runtime/contracts.py."""
