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
import os
from pathlib import Path
from typing import Any
from urllib.parse import ParseResult, unquote, urlparse

from irgrid.util.errors import Error

INDEX_MARKER = "irgrid-index.json"  # = irgrid.store.MARKER (the store sits above core; a test checks they agree)

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


def _backends(folder: Path) -> list[Path]:
    return [folder / name for name in KINDS if (folder / name).is_dir()]


def metadata_adapter(path: str, listing: list[str]) -> dict[str, Any] | None:
    """PyTerrier's hook for folders without `pt_meta.json` type/format: irgrid's cache folders and the backend
    folders inside them (indexes built before irgrid wrote `pt_meta.json`)."""
    folder = Path(path)
    if INDEX_MARKER in listing:
        return {"type": CACHE_FOLDER[0], "format": CACHE_FOLDER[1], "package_hint": "irgrid"}
    if folder.name in KINDS and (folder.parent / INDEX_MARKER).exists():
        type_, format_ = KINDS[folder.name]
        return {"type": type_, "format": format_, "package_hint": PACKAGE_HINTS.get(folder.name, "irgrid")}
    return None


def open_cache_folder(path: str | os.PathLike, **kwargs: Any) -> Any:
    """`pt.Artifact.load(<cache>/indexes/<corpus>/<recipe>-<key>)`: the artifact of its backend folder
    (the entry point of `irgrid_index.cache`; a function, as PyTerrier only calls what the entry point names)."""
    import pyterrier as pt

    folder = Path(path)
    found = _backends(folder)
    if len(found) != 1:
        raise ArtifactError(f"{folder}: an irgrid index folder holds one backend folder ({', '.join(KINDS)}); "
                            f"found {[p.name for p in found] or 'none'}. Load the backend folder itself instead")
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
    unpacked (once) into PyTerrier's artifact cache, as `from_url` does with downloads, after its sha256 is
    checked against the `.json` beside it."""
    import hashlib
    import tarfile

    import pyterrier as pt
    from lz4.frame import LZ4FrameFile

    from irgrid.util.hashing import file_sha256

    path = Path(unquote(parsed.path))
    if path.is_dir():
        return str(path)
    if not path.is_file():
        raise ArtifactNotFoundError(f"{parsed.geturl()}: no such file or folder ({path})")
    target = Path(pt.io.pyterrier_home()) / "artifacts" / hashlib.sha256(parsed.geturl().encode()).hexdigest()
    if target.exists():
        return str(target)
    info = path.with_name(path.name + ".json")
    expected = json.loads(info.read_text()).get("expected_sha256") if info.exists() else None
    if expected:
        actual = file_sha256(path)
        if actual != expected.lower():
            raise ArtifactError(f"{parsed.geturl()}: the package's sha256 is {actual}, its {info.name} "
                                f"says {expected}: a damaged or replaced file; package the artifact again (to_url)")
    target.parent.mkdir(parents=True, exist_ok=True)
    with pt.io.finalized_directory(str(target)) as out, open(path, "rb") as raw, LZ4FrameFile(raw) as lz4, \
            tarfile.open(fileobj=lz4, mode="r|") as tar:
        for member in tar:
            if (member.isfile() or member.isdir()) and pt.io.path_is_under_base(member.path, out):
                tar.extract(member, out, set_attrs=False)
    return str(target)


def load_url(url: str, **kwargs: Any) -> Any:
    """`pt.Artifact.from_url(url)` (kept for symmetry with `to_url`)."""
    import pyterrier as pt

    return pt.Artifact.from_url(url, **kwargs)
