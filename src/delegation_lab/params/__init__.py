"""The typed models of params.yaml: the strict base model and YAML loader, the root model,
its docs and the work-size bounds.

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
