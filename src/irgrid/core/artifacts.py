"""irgrid's indexes as PyTerrier artifacts: `pt.Artifact.load(path)` opens any index irgrid built.

PyTerrier finds an artifact's class from the `type` and `format` of its `pt_meta.json` (entry points of the group
`pyterrier.artifact`, declared in pyproject.toml). Indexes irgrid builds today write that file; indexes built
before it (the cache keys did not change, so they are reused) are recognised by `metadata_adapter` instead: a
backend folder inside a published index folder (the one holding `irgrid-index.json`) names its kind.

PyTerrier 1.1 has `from_url` (and `to_hf`, `to_zenodo`) but no `to_url`, and its `from_url` reads http(s) only.
`to_url` writes `build_package()`'s archive to a `file:` URL and `file_url_resolver` (an entry point of
`pyterrier.artifact.url_protocol_resolver`) lets `pt.Artifact.from_url("file:...")` unpack it, verified against
the sha256 that `build_package` recorded: written here because neither PyTerrier nor its plugins handle `file:`.
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, unquote, urlparse

from irgrid.util.errors import Error

log = logging.getLogger("irgrid")

INDEX_MARKER = "irgrid-index.json"  # = irgrid.store.MARKER (the store sits above core; a test checks they agree)
LAZY_MARKER = "irgrid-lazy.json"  # = irgrid.store.LAZY: files PISA wrote at query time, recorded by the grid

# backend folder name inside a published index folder -> (type, format) of its artifact class
KINDS: dict[str, tuple[str, str]] = {
    "lucene": ("sparse_index", "irgrid-lucene"),            # irgrid.sparse.lucene.LuceneIndex (Anserini)
    "lucene-pisa": ("sparse_index", "irgrid-lucene-pisa"),  # irgrid.sparse.lucene_pisa.LucenePisaIndex
    "pisa": ("sparse_index", "pisa"),                       # pyterrier_pisa.PisaIndex (BM25 or impact)
    "flex": ("dense_index", "flex"),                        # pyterrier_dr.FlexIndex
    "late": ("dense_index", "irgrid-late"),                 # irgrid.dense.search.LateInteractionIndex
}
PACKAGE_HINTS = {"pisa": "pyterrier-pisa", "flex": "pyterrier-dr"}
CACHE_FOLDER = ("irgrid_index", "cache")  # a published index folder of irgrid's cache: opens its backend


def write_meta(folder: str | os.PathLike, kind: str, **extra: Any) -> None:
    """`pt_meta.json` for a backend folder irgrid wrote itself (`kind`: a key of KINDS)."""
    type_, format_ = KINDS[kind]
    meta = {"type": type_, "format": format_, "package_hint": PACKAGE_HINTS.get(kind, "irgrid"), **extra}
    (Path(folder) / "pt_meta.json").write_text(json.dumps(meta))


def write_cache_meta(folder: str | os.PathLike) -> None:
    """`pt_meta.json` of a published index folder of irgrid's cache (type `irgrid_index`, format `cache`): PyTerrier
    then calls `open_cache_folder` at once, which imports nothing but the backend's own class (pyterrier-pisa's
    PisaIndex for a PISA index: no torch). Without it (folders published before it was written) PyTerrier asks
    every installed package's metadata adapter what the folder is, importing each of those packages first."""
    meta = {"type": CACHE_FOLDER[0], "format": CACHE_FOLDER[1], "package_hint": "irgrid"}
    (Path(folder) / "pt_meta.json").write_text(json.dumps(meta))


def _backends(folder: Path) -> list[Path]:
    return [folder / name for name in KINDS if (folder / name).is_dir()]


def metadata_adapter(path: str, listing: list[str]) -> dict[str, Any] | None:
    """PyTerrier's hook for folders without `pt_meta.json` type/format: irgrid's cache folders and the backend
    folders inside them (indexes built before irgrid wrote `pt_meta.json`). A backend folder inside a cache
    folder is verified against the cache folder's manifest first; a folder that holds a backend folder irgrid
    wrote but no manifest is named as such (not PyTerrier's "No implementation found")."""
    folder = Path(path)
    if INDEX_MARKER in listing:
        return {"type": CACHE_FOLDER[0], "format": CACHE_FOLDER[1], "package_hint": "irgrid"}
    if folder.name in KINDS and (folder.parent / INDEX_MARKER).exists():
        verify_cache_folder(folder.parent)
        type_, format_ = KINDS[folder.name]
        return {"type": type_, "format": format_, "package_hint": PACKAGE_HINTS.get(folder.name, "irgrid")}
    written = [name for name in listing if name in KINDS and _own_meta(folder / name)]
    if written:
        raise _without_manifest(folder, written[0])
    return None


def _without_manifest(folder: Path, backend: str) -> ArtifactError:
    return ArtifactError(
        f"{folder}: an irgrid index folder (it holds {backend}/) without its manifest {INDEX_MARKER}: an "
        f"unfinished or damaged build, or a copy made without it. Delete the folder and run irgrid again to "
        f"rebuild it, or load {folder / backend} itself (nothing is verified then)")


def _own_meta(backend: Path) -> bool:
    """Whether `backend/pt_meta.json` is one irgrid writes for a backend folder of that name."""
    try:
        meta = json.loads((backend / "pt_meta.json").read_text())
        return isinstance(meta, dict) and (meta.get("type"), meta.get("format")) == KINDS[backend.name]
    except (OSError, ValueError):
        return False


def _fix(folder: Path) -> str:
    return (f"delete the folder ({folder}) and run irgrid again to rebuild it (`irgrid run` with the experiment "
            f"that built it; the grid itself moves a damaged index aside and rebuilds it)")


def verify_cache_folder(folder: Path) -> None:
    """Refuse a cache folder whose files are not those its manifest lists (sizes and sha256, and the query-time
    files the grid recorded in `irgrid-lazy.json`): the grid's own check (irgrid.util.manifest), hashes once per
    process and file, so a damaged index is never served through `pt.Artifact.load` either."""
    from irgrid.util.manifest import check_files, folder_problem

    problem = folder_problem(folder, INDEX_MARKER, full=True)
    if problem is None and (folder / LAZY_MARKER).exists():
        try:
            lazy = json.loads((folder / LAZY_MARKER).read_text())
            lazy.items()
        except (OSError, ValueError, AttributeError) as e:
            problem = f"{LAZY_MARKER} is unreadable ({type(e).__name__}: {e})"
        else:
            problem = check_files(folder, lazy, full=True)
    if problem is not None:
        raise ArtifactError(f"{folder}: {problem}; this index of irgrid's cache is damaged or was changed after it "
                            f"was built, and is not loaded: {_fix(folder)}")


def _check_backend_meta(folder: Path, backend: Path) -> None:
    """The backend's `pt_meta.json` must be JSON naming the class of that backend folder: refused here, at load,
    not as a wrong class failing at query time."""
    meta_path = backend / "pt_meta.json"
    if not meta_path.exists():
        return  # built before irgrid wrote it: PyTerrier asks `metadata_adapter`
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError) as e:
        raise ArtifactError(f"{meta_path}: not readable JSON ({type(e).__name__}: {e}); {_fix(folder)}") from None
    if not isinstance(meta, dict):
        raise ArtifactError(f"{meta_path}: holds {type(meta).__name__}, not a JSON object; {_fix(folder)}")
    want = KINDS[backend.name]
    have = (meta.get("type"), meta.get("format"))
    if have != want:
        raise ArtifactError(f"{meta_path}: says type={have[0]!r}, format={have[1]!r}, but a {backend.name}/ folder "
                            f"holds type={want[0]!r}, format={want[1]!r}; {_fix(folder)}")


def open_cache_folder(path: str | os.PathLike, **kwargs: Any) -> Any:
    """`pt.Artifact.load(<cache>/indexes/<corpus>/<recipe>-<key>)`: the artifact of its backend folder, once the
    folder matches its manifest (the entry point of `irgrid_index.cache`; a function, as PyTerrier only calls
    what the entry point names)."""
    import pyterrier as pt

    folder = Path(path)
    found = _backends(folder)
    if len(found) != 1:
        raise ArtifactError(f"{folder}: an irgrid index folder holds one backend folder ({', '.join(KINDS)}); "
                            f"found {[p.name for p in found] or 'none'}. Load the backend folder itself instead")
    if not (folder / INDEX_MARKER).exists():  # its pt_meta.json says irgrid's, but the manifest is gone
        raise _without_manifest(folder, found[0].name)
    _check_backend_meta(folder, found[0])
    verify_cache_folder(folder)
    return pt.Artifact.load(str(found[0]), **kwargs)


class ArtifactError(Error, ValueError):
    """An index folder, package or URL that is not what irgrid writes or can load; the message says what is."""


class ArtifactNotFoundError(ArtifactError, FileNotFoundError):
    """An artifact URL naming nothing."""


class Packaged:
    """`to_url` as a method, for irgrid's own artifact classes (PyTerrier's `Artifact` has none)."""

    def to_url(self, url: str) -> str:
        return to_url(self, url)


def to_url(artifact: Any, url: str) -> str:
    """Package a PyTerrier artifact (`build_package`: a tar.lz4 with `pt_meta.json`, and a `.json` beside it
    with its sha256) at a `file:` URL; `pt.Artifact.from_url(url)` loads it back. Returns the URL."""
    parsed = urlparse(url)
    if parsed.scheme != "file":
        raise ArtifactError(f"to_url({url!r}): only file: URLs are written here (file:///abs/path/name.tar.lz4); "
                            f"for the Hugging Face Hub or Zenodo use the artifact's to_hf() / to_zenodo()")
    target = Path(unquote(parsed.path))
    if target.exists():
        raise FileExistsError(f"to_url: {target} exists; choose a new name (packages are never overwritten)")
    target.parent.mkdir(parents=True, exist_ok=True)
    artifact.build_package(str(target), verbose=False)
    return url


def file_url_resolver(parsed: ParseResult) -> str:
    """`file:` URLs for `pt.Artifact.from_url`: a folder loads in place; a package written by `to_url` is
    unpacked into PyTerrier's artifact cache under its content's sha256 (never its URL: a package replaced at
    the same URL is another folder), after that sha256 is checked against the `.json` beside it.

    The package's sha256 is computed again whenever the file's size, modification time or inode changed since
    it was last hashed (recorded beside the unpacked folders), so a package changed after its first load is
    re-checked. A package without its `.json` loads with a warning: nothing says what it should hold, but its own
    content still keys the unpacked copy. A package that is not a complete tar.lz4 is refused, named."""
    import tarfile

    import pyterrier as pt
    from lz4.frame import LZ4FrameFile

    path = Path(unquote(parsed.path))
    if path.is_dir():
        return str(path)
    if not path.is_file():
        raise ArtifactNotFoundError(f"{parsed.geturl()}: no such file or folder ({path})")
    info = path.with_name(path.name + ".json")
    expected = None
    if info.exists():
        try:
            expected = json.loads(info.read_text()).get("expected_sha256")
        except (OSError, ValueError, AttributeError) as e:
            raise ArtifactError(f"{info}: unreadable ({type(e).__name__}: {e}); package the artifact again "
                                f"(to_url) or delete {info.name} to load the package unverified") from None
    else:
        log.warning("%s: no %s beside it, so nothing verifies the package (to_url writes one); loading it "
                    "unverified", parsed.geturl(), info.name)
    root = Path(pt.io.pyterrier_home()) / "artifacts"
    actual = _package_sha256(path, root)
    if expected and actual != str(expected).lower():
        raise ArtifactError(f"{parsed.geturl()}: the package's sha256 is {actual}, its {info.name} "
                            f"says {expected}: a damaged or replaced file; package the artifact again (to_url)")
    target = root / f"irgrid-sha256-{actual}"
    if target.is_dir():
        return str(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        with pt.io.finalized_directory(str(target)) as out, open(path, "rb") as raw, LZ4FrameFile(raw) as lz4, \
                tarfile.open(fileobj=lz4, mode="r|") as tar:
            for member in tar:
                if (member.isfile() or member.isdir()) and pt.io.path_is_under_base(member.path, out):
                    tar.extract(member, out, set_attrs=False)
    except (EOFError, tarfile.TarError, RuntimeError) as e:  # lz4 raises RuntimeError on a damaged frame
        raise ArtifactError(f"{parsed.geturl()}: not a complete tar.lz4 package ({type(e).__name__}: {e}): a "
                            f"truncated or damaged file; package the artifact again (to_url)") from None
    except OSError:
        if not target.is_dir():  # another process unpacked the same content first: theirs is the same
            raise
    return str(target)


def _package_sha256(path: Path, root: Path) -> str:
    """The package's sha256, hashed again unless its size, mtime and inode are those recorded when it was last
    hashed (a small record per package path under `root`)."""
    import hashlib

    from irgrid.util.files import write_text_atomic
    from irgrid.util.hashing import file_sha256

    st = path.stat()
    stamp = [st.st_size, st.st_mtime_ns, st.st_ino]
    record = root / f"irgrid-file-{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:32]}.json"
    try:
        seen = json.loads(record.read_text())
        if seen["stamp"] == stamp:
            return str(seen["sha256"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    actual = file_sha256(path)
    root.mkdir(parents=True, exist_ok=True)
    write_text_atomic(record, json.dumps({"path": str(path), "stamp": stamp, "sha256": actual}))
    return actual


def load_url(url: str, **kwargs: Any) -> Any:
    """`pt.Artifact.from_url(url)` (kept for symmetry with `to_url`)."""
    import pyterrier as pt

    return pt.Artifact.from_url(url, **kwargs)
