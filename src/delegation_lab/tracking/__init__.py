"""MLflow: the one tracking wrapper, the tracking server and its token gate, run comparison.

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
