"""From what a runtime reports back to the Python line: debug handles, instructions, logs and profiles.

Works on tracepack documents (a :class:`~tracepack.Document` or a lazily opened
:class:`~tracepack.lazy.LazyDocument`), never imports torch or ExecuTorch:

* :mod:`tracepack.runtime.symbols`: a document's debug-handle table and instruction map as answers
  (handle -> op, module path, Python stack, the graph nodes behind it; instruction -> handles);
* :mod:`tracepack.runtime.logs`: finds handle references in text (ExecuTorch's ``KernelCall failed at
  instruction C:I``, the lite interpreter's ``debug_handles:{N}``) and rewrites them, like
  ``llvm-symbolizer`` or ``ndk-stack`` do for native code;
* :mod:`tracepack.runtime.profile`: ETDump events and torch.profiler Chrome traces annotated with
  module path, source line and op; per-module time summaries.
"""
