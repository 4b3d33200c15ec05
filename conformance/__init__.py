"""The tracepack conformance suite (spec/12-conformance.md): vectors, expected outputs, a runner for any
implementation (``python -m conformance.run --impl CMD``) and the generator of the vectors
(``python -m conformance.generate``)."""
