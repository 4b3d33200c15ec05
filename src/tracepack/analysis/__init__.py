"""What works across many programs; for now, op spellings.

``tracepack.analysis.ops``
    an op as people copy it from torch tools (``aten::linear``, ``aten.linear.default``,
    ``torch.ops.aten.linear.default``, ``linear``, a schema string) as dotted words, and the match
    ``tracepack nodes --op``, :mod:`tracepack.query` and ``annotate`` use.

Nothing here imports torch.
"""
