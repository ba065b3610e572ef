"""The reference's P1 worker: checkpoint journal, fast-state cache, workspaces, and the worker loop."""
