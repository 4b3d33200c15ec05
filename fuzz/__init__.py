"""Coverage-guided fuzzing of every entry point that reads a file (issue 24).

One atheris harness per entry point in :mod:`fuzz.harnesses`, each a module with ``test_one_input``
(the contract: tracepack returns a result or raises an :class:`~tracepack.errors.InputError` with a
one-line message; anything else is a finding), the modules it targets and its seeds. ``python -m
fuzz.main HARNESS`` runs one under libFuzzer (instrumented); ``python -m fuzz.run`` is the campaign
driver behind ``make fuzz-cov`` and ``make fuzz-smoke``. See docs/hostile-input.md.
"""
