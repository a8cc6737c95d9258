"""Rank resolution: which places of a leaderboard the queries can tell apart.

The queries are resampled with replacement (one paired bootstrap: every system on the same resampled queries), the
systems ranked by mean in each replicate, and each system's rank interval is the 2.5-97.5 percentile range of its
ranks. Two systems are *resolved* when their paired mean difference is significant: z = diff / SE_boot(diff)
(the bootstrap standard error over the same replicates), two-sided normal p, corrected with the experiment's
correction over all pairs of the (dataset, measure), at alpha. A system's tie group is the set of systems it is not
resolved from; `letters` turns the relation into a compact display: systems ordered by mean, each maximal run in
which no pair is resolved gets a letter, and systems that share a letter are not told apart.

The normal p of the bootstrap SE, not the share of replicates, because a corrected family of 500 pairs needs
p-values below 1e-4, which a percentile count of 1,000 replicates cannot give.
"""

from __future__ import annotations

import math
import string
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from irgrid.core.significance import correct

RANK_B = 1000
RANK_SEED = 0
RESOLUTION = ("paired bootstrap over queries; rank interval: 2.5-97.5 percentile of the system's rank over the "
              "replicates; a pair is resolved when diff / bootstrap SE of the paired difference is significant "
              "(two-sided normal p, the experiment's correction over all pairs, alpha)")


def stream_seed(seed: int, dataset: str, measure: str) -> list[int]:
    """One random stream per (dataset, measure), shared by all its systems (common random numbers) and
    independent of the grid's order."""
    return [seed, zlib.crc32(f"{dataset}\t{measure}".encode())]


@dataclass(frozen=True)
class Resolution:
    """Per system (`systems`: system, mean, rank, rank_low, rank_high, tie_group, tied_with) and per pair
    (`pairs`: a, b, diff, se, p, p_corrected, resolved)."""

    systems: pd.DataFrame
    pairs: pd.DataFrame

    def unresolved(self, system: str) -> list[str]:
        """The other systems of `system`'s tie group (order not resolved)."""
        p = self.pairs[~self.pairs["resolved"]]
        return sorted({*p.loc[p["a"] == system, "b"], *p.loc[p["b"] == system, "a"]})


def _competition_ranks(means: np.ndarray) -> np.ndarray:
    """Rank 1 = the highest mean; equal means share the best of their ranks (1, 2, 2, 4), per row."""
    means = np.atleast_2d(means)
    return (means[:, None, :] > means[:, :, None]).sum(axis=2) + 1


def resolve(values: np.ndarray, systems: Sequence[str], n_resamples: int = RANK_B,
            seed: int | Sequence[int] = RANK_SEED, alpha: float = 0.05, correction: str | None = None) -> Resolution:
    """Rank intervals and tie groups of `systems` from their per-query values (`values`: queries x systems, the
    queries every system was evaluated on)."""
    x = np.asarray(values, dtype=float)
    n, k = x.shape
    if k != len(systems):
        raise ValueError(f"{k} columns of values for {len(systems)} systems")
    mean = x.mean(axis=0) if n else np.full(k, math.nan)
    rng = np.random.default_rng(seed)
    if n >= 2:
        boot = np.empty((n_resamples, k))  # every system's mean on the same replicates
        step = max(1, (1 << 22) // n)
        for start in range(0, n_resamples, step):  # B x n resampling counts, 32 MiB at a time
            b = min(step, n_resamples - start)
            picks = rng.integers(0, n, size=(b, n)) + (np.arange(b) * n)[:, None]
            counts = np.bincount(picks.ravel(), minlength=b * n).reshape(b, n)
            boot[start:start + b] = counts @ x / n
    else:
        boot = np.repeat(mean[None, :], max(n_resamples, 1), axis=0)
    ranks = _competition_ranks(boot)
    observed = _competition_ranks(mean)[0]
    low = np.percentile(ranks, 2.5, axis=0, method="lower")
    high = np.percentile(ranks, 97.5, axis=0, method="higher")
    rows = []
    for i in range(k):
        for j in range(i + 1, k):
            diff = float(mean[i] - mean[j])
            se = float((boot[:, i] - boot[:, j]).std(ddof=1)) if len(boot) > 1 else 0.0
            if se > 0:
                from scipy.stats import norm

                p = float(2 * norm.sf(abs(diff) / se))
            else:
                p = 1.0 if diff == 0 or n < 2 else 0.0
            rows.append({"a": systems[i], "b": systems[j], "diff": diff, "se": se, "p": p})
    corrected = correct([r["p"] for r in rows], correction, alpha) if rows else np.zeros(0)
    unresolved = np.eye(k, dtype=bool)
    for r, pc in zip(rows, corrected):
        r["p_corrected"], r["resolved"] = float(pc), bool(pc < alpha)
        if not r["resolved"]:
            i, j = systems.index(r["a"]), systems.index(r["b"])
            unresolved[i, j] = unresolved[j, i] = True
    pairs = pd.DataFrame(rows, columns=["a", "b", "diff", "se", "p", "p_corrected", "resolved"])
    groups = letters(mean, unresolved)
    table = pd.DataFrame({"system": list(systems), "mean": mean, "rank": observed, "rank_low": low,
                          "rank_high": high, "tie_group": groups, "tied_with": unresolved.sum(axis=1) - 1})
    return Resolution(table, pairs)


def letters(mean: np.ndarray, unresolved: np.ndarray) -> list[str]:
    """Compact letters: systems sorted by mean (descending); every maximal run of consecutive systems in which no
    pair is resolved gets the next letter; a system's letters are those of the runs it is in."""
    k = len(mean)
    order = sorted(range(k), key=lambda i: (-mean[i], i))
    runs: list[tuple[int, int]] = []
    for a in range(k):
        b = a
        while b + 1 < k and all(unresolved[order[b + 1], order[c]] for c in range(a, b + 1)):
            b += 1
        if not runs or b > runs[-1][1]:
            runs.append((a, b))
    many = len(runs) > len(string.ascii_lowercase)  # then a1, b1, ..., a2, ...: joined with commas
    names = [f"{string.ascii_lowercase[i % 26]}{i // 26 + 1}" if many else string.ascii_lowercase[i]
             for i in range(len(runs))]
    members: list[list[str]] = [[] for _ in range(k)]
    for name, (a, b) in zip(names, runs):
        for pos in range(a, b + 1):
            members[order[pos]].append(name)
    return [("," if many else "").join(m) for m in members]
