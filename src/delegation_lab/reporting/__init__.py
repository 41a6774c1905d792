"""What the docs and the dashboard report of the metrics: doc numbers, paper vs ours,
rerun checks.

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
