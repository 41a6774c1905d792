"""Ability maps: success rate per solver x difficulty bucket.

Import the modules themselves; this file re-exports nothing (it runs whenever any of them is
imported)."""
