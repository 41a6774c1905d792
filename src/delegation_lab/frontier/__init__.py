"""The shared cost-accuracy frontier: the build, its baselines, searched cascades, curves,
the field's metrics, served rows and the plot.

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
