"""Pure comparison of two run records: no GPU, no network, no clock."""
