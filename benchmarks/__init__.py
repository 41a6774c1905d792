"""Speed benchmarks. Each prints ratios measured within one run (never a bare wall time)."""
