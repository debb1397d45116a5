"""Python functions used by the default capability set (skills.yaml → kind: python)."""
