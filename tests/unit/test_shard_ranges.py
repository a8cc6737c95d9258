"""Shards tile a corpus on chunk boundaries."""

from __future__ import annotations

import pytest

from irgrid.cluster import sharding


def test_shard_ranges_tile_the_corpus_on_chunk_boundaries():
    assert sharding.shard_ranges(100, 3, 16) == [(0, 48), (48, 80), (80, 100)]  # 7 chunks: 3 + 2 + 2
    assert sharding.shard_ranges(10, 4, 16) == [(0, 10)]  # one chunk: one shard
    assert sharding.shard_ranges(64, 4, 16) == [(0, 16), (16, 32), (32, 48), (48, 64)]
    assert sharding.shard_ranges(0, 3, 16) == [(0, 0)]
    for n, k in [(1000, 7), (33, 2), (4096 * 3 + 5, 3)]:
        ranges = sharding.shard_ranges(n, k, 16)
        assert ranges[0][0] == 0 and ranges[-1][1] == n
        assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:])) and all(a % 16 == 0 for a, _ in ranges)
    with pytest.raises(ValueError):
        sharding.shard_ranges(10, 0, 16)

