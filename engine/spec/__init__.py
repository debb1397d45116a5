"""Specs: the YAML files read (with their line numbers) into pydantic models, before anything is linked."""
