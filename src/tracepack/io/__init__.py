"""Every byte in and out of tracepack: archive members (``zip``), the limits that bound them
(:mod:`.limits`), safe input opening and the one atomic writer (:mod:`.files`)."""
