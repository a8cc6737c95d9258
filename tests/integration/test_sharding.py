"""Sharded corpus encoding: shards on chunk boundaries, merged into the index one process would write, bit for
bit (all-MiniLM-L6-v2, real weights, a SciFact slice)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from irgrid.cluster import sharding
from irgrid.models.cache import MODELS

CHUNK = 16


@pytest.fixture(scope="module")
def slice_dataset(tmp_path_factory):
    from support import write_scifact_slice

    from irgrid.runner.experiment import from_dict

    root = tmp_path_factory.mktemp("shards")
    files = write_scifact_slice(root, 3, 45)
    exp = {"name": "shards", "collections": [{"name": "shard-slice", **files}], "datasets": ["shard-slice"],
           "retrievers": ["all-minilm-l6-v2"]}
    spec = from_dict(exp, source=str(root / "exp.yaml"))
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IRGRID_ENCODE_CHUNK", str(CHUNK))
        MODELS.release_all()  # engines made in this process pick up the chunk size
        yield root, spec.datasets[0], spec.retrievers[0].index
    MODELS.release_all()  # later tests get engines with the default chunk size


def _flex_files(path):
    flex = path / "flex"
    return {p.relative_to(flex).as_posix(): p.read_bytes() for p in sorted(flex.rglob("*"))
            if p.is_file() and p.name != "encoding.json"}


def test_merged_shards_equal_the_single_process_index_bit_for_bit(slice_dataset):
    from pyterrier_dr import FlexIndex

    from irgrid.runner import cell as cell_mod
    from irgrid.store import Store

    root, dataset, recipe = slice_dataset
    single, sharded = Store(root / "single"), Store(root / "sharded")
    one = cell_mod.ensure_index(recipe, dataset, single)  # the recipe's own build: one process, one engine
    ranges = sharding.shard_ranges(dataset.docs_count(), 3, CHUNK)
    assert ranges == [(0, 16), (16, 32), (32, 45)]
    for start, stop in reversed(ranges):  # any order: each shard knows its place in the corpus
        sharding.encode_shard(recipe, dataset, sharded, start, stop)
    merged = sharding.merge_shards(recipe, dataset, sharded, ranges)
    assert merged.name == one.name  # the same cache key: a grid cannot tell how its index was encoded
    a, b = FlexIndex(str(one / "flex")), FlexIndex(str(merged / "flex"))
    (docnos_a, va), (docnos_b, vb) = ((p[0], np.asarray(p[1])) for p in (a.payload(), b.payload()))
    assert va.dtype == vb.dtype == np.float32 and va.shape == vb.shape == (45, 384)
    assert va.tobytes() == vb.tobytes()  # bit for bit
    assert list(docnos_a) == list(docnos_b) == [d["docno"] for d in dataset.docs()]  # corpus order
    assert _flex_files(one) == _flex_files(merged)  # and so is every file of the index
    record = json.loads((merged / "flex" / "encoding.json").read_text())
    assert [s["docs"] for s in record["shards"]] == [16, 16, 13]
    assert not sharded.indexes.shard_root(recipe, dataset).exists()  # merged shards are removed
    assert sorted(b["kind"] for b in sharded.builds()) == ["index", "shard", "shard", "shard"]


def test_a_misaligned_shard_or_a_missing_one_is_a_clear_error(slice_dataset):
    from irgrid.store import Store

    root, dataset, recipe = slice_dataset
    store = Store(root / "bad")
    with pytest.raises(sharding.ShardError, match="not a multiple of the encoding chunk size"):
        sharding.encode_shard(recipe, dataset, store, 5, 20)
    with pytest.raises(sharding.ShardError, match="not finished"):
        sharding.merge_shards(recipe, dataset, store, [(0, 16), (16, 45)])
    with pytest.raises(sharding.ShardError, match="do not tile"):
        sharding.merge_shards(recipe, dataset, store, [(0, 16), (20, 45)])
    assert not store.indexes.ready(recipe, dataset)
