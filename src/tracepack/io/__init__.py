"""Every byte in and out of tracepack: archive members (``zip``), and the limits that bound them."""
