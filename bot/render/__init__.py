"""Pure rendering of comparisons into markdown (and HTML): no network, no GitHub."""
