"""Shared test configuration: hypothesis profiles.

``HYPOTHESIS_PROFILE`` picks one: ``fast`` (local iteration), ``dev`` (the
default) or ``ci`` (thorough, derandomized so CI is repeatable).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("fast", max_examples=15, deadline=None)
settings.register_profile("dev", max_examples=60, deadline=None)
settings.register_profile(
    "ci",
    max_examples=200,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))
