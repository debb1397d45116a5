"""The little languages of the YAML files: mappings ($toolArgs, $steps…), conditions (when:), templates (Jinja) and JSON Schema (compiled)."""
