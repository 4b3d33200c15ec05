"""Package layout (the metadata is in pyproject.toml).

The packages are found, not listed, so new modules need no change here. Besides the code in ``src/`` and
``generated/python/``, the wheel carries the schema files, the generated JSON Schema and FlatBuffers schema
as data packages of ``tracepack_generated`` (``tracepack schema check --all`` uses them installed), and
leaves out flatc's Python module (``vX_Y/fb/tables.py``), which only the tests import.
"""

import os

from setuptools import Extension, find_namespace_packages, find_packages, setup

DATA_PACKAGES = {
    "tracepack_generated.schema": ("schema", ["*.toml", "RELEASED.sha256"]),
    "tracepack_generated.jsonschema": ("generated/jsonschema", ["*.json"]),
    "tracepack_generated.fbs": ("generated/fbs", ["*.fbs"]),
}

CODE = find_namespace_packages("src", exclude=["*.__pycache__"])
#: Every folder under src/tracepack/data/ (samples, built-in zstd dictionaries, ...) ships whole.
BUNDLED = {name: ["*"] for name in CODE if name.startswith("tracepack.data.")}

#: The columnar codec's ``forms`` loops in C. Optional: where it cannot be compiled (no compiler for the sdist)
#: the package installs without it and runs the same encoding in Python (``tracepack.codecs.columnar``).
#: ``TRACEPACK_PURE_PYTHON=1`` at build time leaves it out (the pure-Python ``py3-none-any`` wheel);
#: ``TRACEPACK_REQUIRE_C=1`` makes a failed compile an error (cibuildwheel's platform wheels, pyproject.toml).
SPEEDUPS = [
    Extension(
        "tracepack.codecs._cforms",
        ["src/tracepack/codecs/_cforms.c"],
        optional=not os.environ.get("TRACEPACK_REQUIRE_C"),
    )
]
if os.environ.get("TRACEPACK_PURE_PYTHON"):
    SPEEDUPS = []

setup(
    ext_modules=SPEEDUPS,
    packages=[
        *CODE,
        *find_packages("generated/python", exclude=["*.fb"]),
        *DATA_PACKAGES,
    ],
    package_dir={
        "": "src",
        "tracepack_generated": "generated/python/tracepack_generated",
        **{name: folder for name, (folder, _) in DATA_PACKAGES.items()},
    },
    # Only what package_data names: the sdist's other files (tests, flatc's fb/tables.py) stay out of the wheel.
    include_package_data=False,
    package_data={
        "tracepack": ["py.typed", "codecs/_cforms.pyi"],
        **BUNDLED,
        "tracepack_generated": ["py.typed"],
        **{name: patterns for name, (_, patterns) in DATA_PACKAGES.items()},
    },
)
