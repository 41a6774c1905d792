"""The stage runtime: run_stage, Layout (every path), schemas, atomic tables, the trajectory
store and DuckDB views, numerics pins, timings, worker pools, figures.

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
