"""irgrid's PyTerrier artifact hooks without any index: the declared entry points resolve to irgrid's classes, the
metadata adapter names what an irgrid cache folder holds, and bad paths or URLs are refused with a clear message.
(tests/integration/test_artifacts.py loads real indexes of every kind.)"""

from __future__ import annotations

import json
from urllib.parse import urlparse

import pyterrier as pt
import pytest

from irgrid.core import artifacts


def test_entry_points_are_declared_and_resolve():
    declared = {ep.name: ep for ep in pt.utils.entry_points("pyterrier.artifact")}
    for kind in ("lucene", "lucene-pisa", "late"):
        type_, format_ = artifacts.KINDS[kind]
        cls = declared[f"{type_}.{format_}"].load()
        assert pt.inspect.artifact_type_format(cls) == (type_, format_) and issubclass(cls, pt.Artifact)
    assert declared["irgrid_index.cache"].load() is artifacts.open_cache_folder
    adapters = {ep.name: ep.load() for ep in pt.utils.entry_points("pyterrier.artifact.metadata_adapter")}
    assert adapters["irgrid"] is artifacts.metadata_adapter
    resolvers = {ep.name: ep.load() for ep in pt.utils.entry_points("pyterrier.artifact.url_protocol_resolver")}
    assert resolvers["file"] is artifacts.file_url_resolver


def test_metadata_adapter_names_cache_folders_and_their_backends(tmp_path):
    folder = tmp_path / "lucene-flat-0123456789ab"
    (folder / "lucene").mkdir(parents=True)
    assert artifacts.metadata_adapter(str(folder / "lucene"), []) is None  # no marker: not irgrid's
    (folder / "lucene" / "segments_1").write_bytes(b"index bytes")
    from irgrid.util.manifest import file_digest

    files = {"lucene/segments_1": {"size": 11, "sha256": file_digest(folder / "lucene" / "segments_1")}}
    (folder / artifacts.INDEX_MARKER).write_text(json.dumps({"files": files}))
    assert artifacts.metadata_adapter(str(folder), [artifacts.INDEX_MARKER])["type"] == "irgrid_index"
    meta = artifacts.metadata_adapter(str(folder / "lucene"), [])
    assert (meta["type"], meta["format"]) == artifacts.KINDS["lucene"]
    assert artifacts.metadata_adapter(str(folder / "other"), []) is None
    (folder / "lucene" / "segments_1").write_bytes(b"index bytez")  # a backend folder of a damaged cache folder
    with pytest.raises(ValueError, match="segments_1 does not match its manifest's sha256.*delete the folder"):
        artifacts.metadata_adapter(str(folder / "lucene"), [])


def test_cache_folder_with_no_or_two_backends_is_refused(tmp_path):
    (tmp_path / artifacts.INDEX_MARKER).write_text("{}")
    with pytest.raises(ValueError, match="found none"):
        artifacts.open_cache_folder(tmp_path)
    (tmp_path / "pisa").mkdir()
    (tmp_path / "flex").mkdir()
    with pytest.raises(ValueError, match=r"\['pisa', 'flex'\]"):
        artifacts.open_cache_folder(tmp_path)


def test_bad_urls_are_named(tmp_path):
    with pytest.raises(ValueError, match="only file: URLs"):
        artifacts.to_url(object(), "s3://bucket/index.tar.lz4")
    with pytest.raises(FileNotFoundError, match="no such file or folder"):
        artifacts.file_url_resolver(urlparse(f"file://{tmp_path}/missing.tar.lz4"))
    assert artifacts.file_url_resolver(urlparse(f"file://{tmp_path}")) == str(tmp_path)  # a folder: in place
