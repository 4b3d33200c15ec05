"""tracepack benchmarks (``make bench``): every figure is a ratio against a baseline run in the same process."""
