"""What works across many programs: op spellings, the zoo job and its incremental Parquet dataset.

``tracepack.analysis.ops``
    an op as people copy it from torch tools (``aten::linear``, ``aten.linear.default``,
    ``torch.ops.aten.linear.default``, ``linear``, a schema string) as dotted words, and the match
    ``tracepack nodes --op``, :mod:`tracepack.query` and ``annotate`` use.
``tracepack.analysis.dataset``
    the tables of many programs as a Parquet dataset: one file per program and table, keyed by the
    input's content hash, versioned (``docs/tables.md``).
``tracepack.analysis.zoo``
    the job that fills it (``tracepack export --format parquet``): on every core of this machine
    (:mod:`tracepack.analysis.pool`) or on a Ray cluster (:mod:`tracepack.analysis.ray_engine`).

Nothing here imports torch, and pyarrow and ray only when a table is written or a Ray job runs.
"""
