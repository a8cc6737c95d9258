"""Rank resolution (irgrid.core.ranks): identical systems always share a tie group, a clearly separated pair never
does, rank intervals cover the observed rank, letters for a chain of overlapping ties."""

from __future__ import annotations

import numpy as np

from irgrid.core import ranks


def _shares(groups: list[str], i: int, j: int) -> bool:
    return bool(set(groups[i].split(",") if "," in groups[i] else groups[i]) &
                set(groups[j].split(",") if "," in groups[j] else groups[j]))


def test_identical_systems_share_a_group_in_every_replicate_and_separated_ones_never():
    """30 bootstrap replicates of a base set of 60 queries (resampled with replacement): a system and its exact
    copy share a tie group every time; a system 0.3 above them on every query (plus noise) never does; the copy is
    never resolved from the original (p = 1)."""
    base_rng = np.random.default_rng(0)
    a = base_rng.beta(2, 3, 60)
    strong = np.clip(a + 0.3 + base_rng.normal(0, 0.05, 60), 0, 1.5)
    x = np.column_stack([a, a.copy(), strong])
    names = ["a", "a-copy", "strong"]
    rng = np.random.default_rng(1)
    for replicate in range(30):
        sample = x[rng.integers(0, 60, 60)]
        res = ranks.resolve(sample, names, n_resamples=500, seed=replicate,
                             correction="holm" if replicate % 3 == 0 else None)
        groups = list(res.systems["tie_group"])
        assert _shares(groups, 0, 1) and not _shares(groups, 0, 2) and not _shares(groups, 1, 2)
        assert res.unresolved("a") == ["a-copy"] and res.unresolved("strong") == []
        pair = res.pairs[(res.pairs["a"] == "a") & (res.pairs["b"] == "a-copy")].iloc[0]
        assert pair["p"] == 1.0 and not pair["resolved"]
        table = res.systems.set_index("system")
        assert table.at["strong", "rank"] == 1 and table.at["strong", "rank_low"] == table.at["strong", "rank_high"] == 1
        assert (table["rank_low"] <= table["rank"]).all() and (table["rank"] <= table["rank_high"]).all()


def test_a_chain_of_ties_gets_overlapping_letters():
    """b is not resolved from a nor c, but a is from c: a 'a', b 'ab', c 'b'."""
    rng = np.random.default_rng(3)
    n = 200
    base = rng.normal(0, 1, n)
    x = np.column_stack([base + 0.10 + rng.normal(0, 0.3, n), base + 0.05 + rng.normal(0, 0.3, n),
                         base + rng.normal(0, 0.3, n)])
    res = ranks.resolve(x, ["a", "b", "c"], n_resamples=1000, seed=0)
    resolved = {(r.a, r.b): r.resolved for r in res.pairs.itertuples()}
    if resolved[("a", "c")] and not resolved[("a", "b")] and not resolved[("b", "c")]:
        assert list(res.systems["tie_group"]) == ["a", "ab", "b"]
    letters = ranks.letters(np.array([3.0, 2.0, 1.0]), np.array([[1, 1, 0], [1, 1, 1], [0, 1, 1]], dtype=bool))
    assert letters == ["a", "ab", "b"]
    many = ranks.letters(np.arange(30.0)[::-1], np.eye(30, dtype=bool))
    assert many[0] == "a1" and many[26] == "a2" and len(set(many)) == 30
