"""`dlab query`: the sealed read-only DuckDB surface and its streamed output.

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
