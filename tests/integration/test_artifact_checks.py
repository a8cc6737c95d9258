"""A damaged or replaced index is never served through PyTerrier's artifact door (issue 40, items 2, 3 and 8).

`pt.Artifact.load` on a cache folder runs the grid's own check of the folder's manifest (sizes and sha256, the
query-time files PISA wrote included); `pt.Artifact.from_url("file:...")` keys what it unpacks by the package's
content; a broken `pt_meta.json` or a folder without its manifest is named with how to fix it. One PISA index of
Vaswani (seconds to build) and a 30-document PISA index as the "other" package."""

from __future__ import annotations

import json
import logging
import shutil

import pyterrier as pt
import pytest

from irgrid.core.artifacts import INDEX_MARKER, LAZY_MARKER, ArtifactError, to_url
from irgrid.core.retrievers import get
from irgrid.core.ties import canonical_order
from irgrid.data.datasets import get as get_dataset


@pytest.fixture(autouse=True)
def _pyterrier_home(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTERRIER_HOME", str(tmp_path / "pyterrier-home"))  # from_url unpacks packages here


@pytest.fixture(scope="module")
def pisa_folder(tmp_path_factory):
    """A BM25 PISA index of Vaswani in a cache of its own, queried once by the grid's door, so its query-time
    files (`bm25.k1-0.9.b-0.4...`) exist and are recorded in irgrid-lazy.json."""
    from irgrid.runner.build import python_pipeline
    from irgrid.store import Store

    store = Store(tmp_path_factory.mktemp("artifact-checks") / "cache")
    entry, ds = get("bm25-pisa"), get_dataset("vaswani")
    topics = ds.topics().head(10)
    ours = python_pipeline(entry, ds, store=store).transform(topics)
    folder = store.indexes.dir(entry.index, ds)
    assert json.loads((folder / LAZY_MARKER).read_text())  # the query-time files are recorded
    return folder, topics, ours


def _copy(folder, tmp_path):
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    return copy


def _drop_pt_meta(folder):
    """The folder as an index built before irgrid wrote pt_meta.json: neither the file nor its manifest line."""
    (folder / "pisa" / "pt_meta.json").unlink()
    marker = json.loads((folder / INDEX_MARKER).read_text())
    del marker["files"]["pisa/pt_meta.json"]
    (folder / INDEX_MARKER).write_text(json.dumps(marker))


def _query_time_file(folder):
    return next(folder / rel for rel in json.loads((folder / LAZY_MARKER).read_text()) if rel.endswith("simdbp"))


def _run(index, topics):
    return index.bm25(k1=0.9, b=0.4, num_results=1000).transform(topics)


def test_an_intact_cache_folder_loads_and_gives_the_grid_run(pisa_folder, tmp_path):
    folder, topics, ours = pisa_folder
    got = _run(pt.Artifact.load(str(_copy(folder, tmp_path))), topics)
    # in trec_eval's tie order, as irgrid hands its runs on (PISA's own transformer keeps PISA's order of ties)
    got, ours = canonical_order(got), canonical_order(ours)
    assert got[["qid", "docno", "score"]].equals(ours[["qid", "docno", "score"]])


@pytest.mark.parametrize("damage", ["cut in half", "4 KB overwritten"])
def test_a_damaged_query_time_file_is_refused(pisa_folder, tmp_path, damage):
    """Before: a cut file crashed Python (SIGSEGV) or returned wrong rankings; 4 KB of garbage changed 675
    (qid, docno) pairs, both with exit 0."""
    folder, _, _ = pisa_folder
    copy = _copy(folder, tmp_path)
    target = _query_time_file(copy)
    size = target.stat().st_size
    if damage == "cut in half":
        with target.open("r+b") as f:
            f.truncate(size // 2)
    else:
        with target.open("r+b") as f:
            f.seek(size // 2)
            f.write(b"\xa5" * 4096)
        assert target.stat().st_size == size
    for path in (copy, copy / "pisa"):  # the cache folder; the backend folder of an index built without pt_meta
        if path.name == "pisa":  # as built before irgrid wrote pt_meta.json: the adapter checks the manifest
            _drop_pt_meta(copy)
        with pytest.raises(ArtifactError, match=rf"{target.name}.*(bytes|sha256).*delete the folder"):
            pt.Artifact.load(str(path))


def test_a_damaged_index_file_is_refused(pisa_folder, tmp_path):
    folder, _, _ = pisa_folder
    copy = _copy(folder, tmp_path)
    with (copy / "pisa" / "inv.docs").open("r+b") as f:
        f.truncate(1000)
    with pytest.raises(ArtifactError, match=r"pisa/inv.docs has 1000 bytes.*rebuild"):
        pt.Artifact.load(str(copy))


# -- item 8: pt_meta.json and the manifest ---------------------------------------------------------------------
def test_a_garbage_pt_meta_json_is_named(pisa_folder, tmp_path):
    folder, _, _ = pisa_folder
    copy = _copy(folder, tmp_path)
    (copy / "pisa" / "pt_meta.json").write_text("{not json")
    with pytest.raises(ArtifactError, match=r"pisa/pt_meta.json: not readable JSON.*delete the folder"):
        pt.Artifact.load(str(copy))


def test_a_wrong_type_in_pt_meta_json_is_refused_at_load(pisa_folder, tmp_path):
    """Before: the wrong class (a FlexIndex) loaded and failed only when queried."""
    folder, _, _ = pisa_folder
    copy = _copy(folder, tmp_path)
    (copy / "pisa" / "pt_meta.json").write_text(json.dumps({"type": "dense_index", "format": "flex"}))
    with pytest.raises(ArtifactError, match=r"pt_meta.json: says type='dense_index', format='flex', but a pisa/"):
        pt.Artifact.load(str(copy))


def test_a_cache_folder_without_its_manifest_says_what_is_missing(pisa_folder, tmp_path):
    """Before: PyTerrier's "No implementation found", naming nothing that is missing."""
    folder, _, _ = pisa_folder
    copy = _copy(folder, tmp_path)
    (copy / INDEX_MARKER).unlink()
    with pytest.raises(ArtifactError, match=rf"without its manifest {INDEX_MARKER}.*Delete the folder"):
        pt.Artifact.load(str(copy))


# -- item 3: file: packages are keyed by their content ---------------------------------------------------------
@pytest.fixture(scope="module")
def other_package(tmp_path_factory):
    """Another collection's index, packaged: 30 documents of a PISA index of their own."""
    from pyterrier_pisa import PisaIndex

    root = tmp_path_factory.mktemp("other")
    index = PisaIndex(str(root / "tiny.pisa"))
    index.indexer().index([{"docno": f"t{i}", "text": f"tiny document number {i} about topic {i % 3}"}
                           for i in range(30)])
    url = to_url(index, f"file://{root}/other.tar.lz4")
    return root / "other.tar.lz4", url


def _num_docs(index) -> int:
    return len(index)


def test_a_package_replaced_at_its_url_is_not_served_from_the_old_copy(pisa_folder, other_package, tmp_path):
    """Before: the folder unpacked from the first package (keyed by the URL) was returned for the second."""
    folder, _, _ = pisa_folder
    first = pt.Artifact.load(str(folder))
    url = to_url(first, f"file://{tmp_path}/shared/index.tar.lz4")
    package = tmp_path / "shared" / "index.tar.lz4"
    assert _num_docs(pt.Artifact.from_url(url)) == _num_docs(first) == 11429
    other, _ = other_package
    shutil.copy(other, package)  # replaced, with its own sidecar
    shutil.copy(other.with_name(other.name + ".json"), package.with_name(package.name + ".json"))
    assert _num_docs(pt.Artifact.from_url(url)) == 30
    shutil.copy(other, package)  # the other package again, now beside a sidecar that is not its own
    (package.with_name(package.name + ".json")).write_text(json.dumps({"expected_sha256": "0" * 64}))
    with pytest.raises(ArtifactError, match="a damaged or replaced file"):
        pt.Artifact.from_url(url)


def test_a_package_changed_after_its_first_load_is_checked_again(other_package, tmp_path):
    other, _ = other_package
    package = tmp_path / "p.tar.lz4"
    shutil.copy(other, package)
    shutil.copy(other.with_name(other.name + ".json"), tmp_path / "p.tar.lz4.json")
    assert _num_docs(pt.Artifact.from_url(f"file://{package}")) == 30
    with package.open("r+b") as f:  # same size, changed bytes
        f.seek(200)
        f.write(b"\0garbage\0")
    with pytest.raises(ArtifactError, match="sha256"):
        pt.Artifact.from_url(f"file://{package}")


def test_a_package_without_its_sidecar_warns_and_a_truncated_one_is_named(other_package, tmp_path, caplog):
    """Decision: a package without its `.json` loads (its content still keys the unpacked copy) with a warning
    that nothing verified it; a truncated one is refused by name, not with a bare EOFError."""
    other, _ = other_package
    package = tmp_path / "bare.tar.lz4"
    shutil.copy(other, package)
    with caplog.at_level(logging.WARNING, logger="irgrid"):
        assert _num_docs(pt.Artifact.from_url(f"file://{package}")) == 30
    assert "bare.tar.lz4.json beside it" in caplog.text and "unverified" in caplog.text
    cut = tmp_path / "cut.tar.lz4"
    cut.write_bytes(other.read_bytes()[: other.stat().st_size // 2])
    with pytest.raises(ArtifactError, match=r"cut.tar.lz4: not a complete tar.lz4 package.*to_url"):
        pt.Artifact.from_url(f"file://{cut}")
    assert not [p for p in (tmp_path / "pyterrier-home" / "artifacts").iterdir() if p.name.startswith(".")]
