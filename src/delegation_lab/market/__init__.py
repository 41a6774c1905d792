"""Sequential-auction markets (seed 004): protocols, bidders, domains and the study sweep."""
