"""The torch corpus of the installed torch release, the 10k-node program exported once per session, and
the marks of tests that need what only some torch releases have.

The committed corpus (``tests/data/torch/corpus``) was written by torch 2.13 (``make samples``); older
releases cannot read it (a newer schema, or the ``<name>/models/`` archive layout before torch 2.8), and
comparing tracepack with torch.export.load needs files the installed torch reads as its own. So on any
other release the tests run on the same models exported by the installed torch
(``scripts/torch/export_corpus.py --small``, once per release and script version, into a cache folder):
every test compares against that torch's own answers on that torch's own files.

``TRACEPACK_TORCH_CORPUS=committed`` uses the committed corpus whatever torch is installed,
``TRACEPACK_TORCH_CORPUS=export`` exports afresh even on torch 2.13 (``docs/torch-releases.md``).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import io
import os
import shutil
import sys
import tempfile
import warnings
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

# CI installs torch (`make test` depends on `venv-torch`): there, a missing torch is a failure, not a skip.
if os.environ.get("CI") and importlib.util.find_spec("torch") is None:
    raise RuntimeError("torch 2.13 is not installed, but CI must run the torch tests: run `make venv-torch`")

#: Marks every torch test module uses: torch's own deprecation chatter is not ours to fail on.
TORCH_MARKS = [
    pytest.mark.torch,
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::UserWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]

ROOT = Path(__file__).resolve().parent.parent.parent
SCRIPTS = ROOT / "scripts" / "torch"
#: The committed corpus and the torch release that wrote it.
COMMITTED_CORPUS = ROOT / "tests" / "data" / "torch" / "corpus"
COMMITTED_TORCH = (2, 13)


def _installed_torch() -> tuple[str, tuple[int, int]] | None:
    """The installed torch's version string and ``(major, minor)``, without importing torch."""
    try:
        version = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None
    major, minor = version.split("+")[0].split(".")[:2]
    return version, (int(major), int(minor))


_INSTALLED = _installed_torch()
#: ``(major, minor)`` of the installed torch (None without torch).
TORCH_VERSION: tuple[int, int] | None = None if _INSTALLED is None else _INSTALLED[1]
TORCH_RELEASE = "none" if _INSTALLED is None else _INSTALLED[0]


def _corpus_folder() -> Path:
    choice = os.environ.get("TRACEPACK_TORCH_CORPUS", "")
    if choice not in ("", "committed", "export"):
        raise RuntimeError(f"TRACEPACK_TORCH_CORPUS={choice!r}: expected 'committed' or 'export'")
    if _INSTALLED is None or choice == "committed" or (TORCH_VERSION == COMMITTED_TORCH and choice != "export"):
        return COMMITTED_CORPUS
    # One folder per torch release and version of the export script: reused by later runs.
    digest = hashlib.sha256()
    for script in ("export_corpus.py", "_sample_common.py"):
        digest.update((SCRIPTS / script).read_bytes())
    cache = Path(os.environ.get("TRACEPACK_TEST_CACHE") or Path(tempfile.gettempdir()) / "tracepack-test-corpus")
    return cache / f"torch-{TORCH_RELEASE}-{digest.hexdigest()[:12]}"


#: The corpus the tests read: written by the installed torch (the committed one on torch 2.13).
CORPUS = _corpus_folder()
EXPORTED = CORPUS != COMMITTED_CORPUS
#: The corpus's programs and TorchScript archives (the same names whoever exported them).
PT2 = sorted(p.name for p in COMMITTED_CORPUS.glob("*.pt2"))
TORCHSCRIPT = sorted(p.name for p in COMMITTED_CORPUS.iterdir() if p.suffix in (".pt", ".ptl"))
TORCHSCRIPT_SAMPLES = ["lite_debug.ptl", "script_legacy.pt", "script_string_table.pt", "traced_string_table.pt"]


def _export_corpus(folder: Path) -> None:
    """``export_corpus.py --small`` with the installed torch into ``folder`` (written aside, then renamed)."""
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import export_corpus

    folder.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=folder.name + ".", dir=folder.parent))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            export_corpus.export_corpus(work, [*export_corpus.SMALL, *export_corpus.SCRIPTS])
        names = sorted(p.name for p in work.iterdir() if p.name != "manifest.json")
        if names != sorted([*PT2, *TORCHSCRIPT]):
            raise RuntimeError(f"export_corpus.py wrote {names}, the committed corpus holds {[*PT2, *TORCHSCRIPT]}")
        try:
            work.rename(folder)
        except OSError:  # another run got there first
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


@pytest.fixture(scope="session", autouse=True)
def installed_torch_corpus() -> Path:
    """:data:`CORPUS`, exported by the installed torch first where it is not the committed one."""
    if EXPORTED and not CORPUS.is_dir():
        pytest.importorskip("torch")
        _export_corpus(CORPUS)
    return CORPUS


@pytest.fixture(scope="session")
def big_pt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``big.pt2`` (more than 10,000 nodes), exported with the installed torch by ``scripts/torch/export_corpus.py``."""
    pytest.importorskip("torch")
    if str(SCRIPTS) not in sys.path:
        sys.path.insert(0, str(SCRIPTS))
    import export_corpus

    out = tmp_path_factory.mktemp("corpus")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_corpus.export_corpus(out, ["big"])
    return out / "big.pt2"


# -- the two archive layouts ------------------------------------------------------------------------

#: The program member of the flat archive torch 2.1-2.7 wrote (every member at the root).
FLAT_PROGRAM = "serialized_exported_program.json"


def is_program(member: str) -> bool:
    """``<top>/models/<model>.json`` (torch 2.8+) or the flat archive's program."""
    return member == FLAT_PROGRAM or ("/models/" in member and member.endswith(".json"))


def model_json(path: Path | bytes) -> bytes:
    """The program member's bytes (read with Python's zipfile, not tracepack's reader)."""
    with zipfile.ZipFile(path if isinstance(path, Path) else io.BytesIO(path)) as archive:
        (member,) = [n for n in archive.namelist() if is_program(n)]
        return archive.read(member)


def members(data: Path | bytes) -> dict[str, bytes]:
    """Every member by its name below the archive's top folder (the flat layout has none)."""
    with zipfile.ZipFile(data if isinstance(data, Path) else io.BytesIO(data)) as archive:
        names = archive.namelist()
        flat = FLAT_PROGRAM in names
        return {(n if flat else n.split("/", 1)[1]): archive.read(n) for n in names}


# -- what only some torch releases have ---------------------------------------------------------------


def _release(version: tuple[int, int]) -> str:
    return f"{version[0]}.{version[1]}"


@dataclass(frozen=True)
class Needs:
    """A torch feature some tests need: the first release that has it, and a probe of the installed
    torch (``test_releases_marks.py`` checks on every release that the probe agrees with the range, so
    a test is never excluded on a release that has what it needs)."""

    what: str
    since: tuple[int, int]
    probe: Callable[[], bool]

    @property
    def present(self) -> bool:
        return TORCH_VERSION is None or self.since <= TORCH_VERSION

    @property
    def mark(self) -> pytest.MarkDecorator:
        return pytest.mark.skipif(
            not self.present,
            reason=f"needs {self.what}: torch {_release(self.since)} and newer (installed: torch {TORCH_RELEASE})",
        )


def _has(module: str, *attrs: str) -> Callable[[], bool]:
    def probe() -> bool:
        try:
            found: object = importlib.import_module(module)
        except ImportError:
            return False
        for attr in attrs:
            if not hasattr(found, attr):
                return False
            found = getattr(found, attr)
        return True

    return probe


def _direct_save() -> bool:
    from tracepack.torch import saver

    try:
        package = importlib.import_module("torch.export.pt2_archive._package")
        constants = importlib.import_module("torch.export.pt2_archive.constants")
    except ImportError:
        return False
    return all(hasattr(package, n) for n in saver._PACKAGE_FUNCTIONS) and all(
        hasattr(constants, n) for n in saver._CONSTANTS
    )


#: torch.export's ``<name>/models/`` archives (``torch.export.pt2_archive``); before, the flat zip.
PACKAGE_LAYOUT = Needs(
    "the <name>/models/ archive layout (torch.export.pt2_archive)", (2, 8), _has("torch.export.pt2_archive.constants")
)


def _reads_package_sample() -> bool:
    import torch

    try:
        torch.export.load(str(ROOT / "src/tracepack/data/sample/tiny_transformer.pt2"))
    except Exception:  # torch 2.8 and 2.9 look for a top-level "version" member the <name>/ archive has not
        return False
    return True


#: torch.export.load of the ``<name>/`` archives torch 2.13 writes (the bundled sample, the corpus): the
#: tests that take torch's answer on those files as the reference.
READS_PACKAGE = Needs(
    "torch.export.load of the <name>/ archives torch 2.13 writes (the bundled sample)", (2, 10), _reads_package_sample
)
#: Several programs in one archive (``package_pt2(f, exported_programs={...})``).
SEVERAL_PROGRAMS = Needs(
    "archives of several programs (torch.export.pt2_archive._package.package_pt2)",
    (2, 8),
    _has("torch.export.pt2_archive._package", "package_pt2"),
)


def _payload_configs() -> bool:
    from tracepack.torch.upgrade import torch_reads_streamed

    return torch_reads_streamed()


#: Weights and constants one record per tensor, with payload configs (``use_pickle``, torchbind and
#: opaque objects): what the streamed ``tracepack upgrade`` writes; before, they are torch.save pickles.
PAYLOAD_CONFIGS = Needs(
    "weights one record per tensor with payload configs (PayloadConfig in torch's export schema)",
    (2, 10),
    _payload_configs,
)
#: torch's package writer functions tracepack.torch.save writes the archive with (before: torch.export.save + pack).
DIRECT_SAVE = Needs(
    "the package writer tracepack.torch.save writes with (torch.export.pt2_archive)", (2, 10), _direct_save
)


def _tensor_meta_road() -> bool:
    from tracepack.torch import deserializer

    serde = importlib.import_module("torch._export.serde.serialize")
    method = getattr(serde.GraphModuleDeserializer, "deserialize_tensor_meta", None)
    return method is not None and deserializer._names(method.__code__) == deserializer._TENSOR_META_NAMES


#: torch's ``deserialize_tensor_meta`` as tracepack's fake-tensor road knows it (``empty_strided``
#: under the fake mode); torch 2.6 makes them another way, and its own code runs there.
FAKE_TENSOR_ROAD = Needs("torch's deserialize_tensor_meta of the fake-tensor road", (2, 8), _tensor_meta_road)
#: Opaque objects among a program's constants (``data/constants/opaque_obj_<n>``, unpickled by
#: torch.export.load); torch 2.10 and 2.12 refuse the member ("Unsupported constant type").
OPAQUE_CONSTANTS = Needs(
    "opaque-object constants (OPAQUE_OBJ_FILENAME_PREFIX in torch.export.pt2_archive.constants)",
    (2, 13),
    _has("torch.export.pt2_archive.constants", "OPAQUE_OBJ_FILENAME_PREFIX"),
)
#: Every ``Needs`` above, for the test that checks each range against its probe.
ALL_NEEDS = {
    "PACKAGE_LAYOUT": PACKAGE_LAYOUT,
    "READS_PACKAGE": READS_PACKAGE,
    "SEVERAL_PROGRAMS": SEVERAL_PROGRAMS,
    "PAYLOAD_CONFIGS": PAYLOAD_CONFIGS,
    "DIRECT_SAVE": DIRECT_SAVE,
    "FAKE_TENSOR_ROAD": FAKE_TENSOR_ROAD,
    "OPAQUE_CONSTANTS": OPAQUE_CONSTANTS,
}
