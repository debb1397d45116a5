"""The little languages of the YAML files: mappings ($args…), conditions (when:), templates (Jinja) and JSON Schema (compiled)."""
