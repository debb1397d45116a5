"""The linker: loaded specs → a Project (linker.py), with the workflows' data flow, broken-tool closures, store overlays and batch expectations it checks and compiles."""
