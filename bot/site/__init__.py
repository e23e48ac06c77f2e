"""`collectbot site`: the run store's histories as a static HTML site (no server, no network)."""
