"""irgrid's one statistics module, used by the grid (pt.Experiment's tests), the report and DisastQA alike.

Paired significance tests over per-query (or per-item) scores, as IR evaluation uses them: Student's t and Wilcoxon
(scipy, as `pt.Experiment` runs them), the paired randomization (permutation) test of Smucker, Allan & Carterette
(CIKM 2007), the paired bootstrap test (Efron & Tibshirani 1993, Sec. 16.4; Sakai, SIGIR 2006), each with a fixed
seed and a stated number of resamples, and the exact McNemar test for paired binary outcomes; the bootstrap
confidence interval and standard error of a mean (scipy); multiple-testing correction (statsmodels, as PyTerrier
applies it).

PyTerrier has no randomization or bootstrap test; `pt.Experiment` takes any `(x, y) -> (statistic, p)` callable,
so `PairedTest` is one and PyTerrier still pairs the queries and applies the correction. The randomization test is
random sign flips of the per-query differences, all 2^n of them when that is no more than the permutations asked
for. Both resampling tests are written here (see `randomization_test` for why not scipy's; scipy has the bootstrap
confidence interval, not the paired bootstrap test).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

TESTS = ("t", "wilcoxon", "randomization", "bootstrap")
ALIASES = {"permutation": "randomization", "student": "t", "fisher": "randomization"}
DEFAULT_RESAMPLES = 10_000
DEFAULT_SEED = 0
CORRECTIONS = ("bonferroni", "holm", "holm-sidak", "hs", "sidak", "simes-hochberg", "fdr_bh", "fdr_by", "none")
COMPARISONS = ("baseline", "all-pairs")
BOOTSTRAP_B = 1000  # resamples of the bootstrap of a mean (report SEs and CIs, QA CIs)
BOOTSTRAP_SEED = 0
_BATCH_VALUES = 1 << 22  # resamples x queries held at once (32 MiB of float64)
MIN_QUERIES = 2  # a paired test on fewer paired queries has no p-value (not computable, with a note)


def _paired(x: Sequence[float], y: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"a paired test needs two equally long 1-d samples; got shapes {a.shape} and {b.shape}")
    return a, b


def randomization_test(x: Sequence[float], y: Sequence[float], permutations: int = DEFAULT_RESAMPLES,
                       seed: int = DEFAULT_SEED) -> tuple[float, float]:
    """(mean difference x - y, two-sided p): the share of sign-flip permutations of the per-query differences
    whose mean is at least as far from 0 as the observed one. A Monte-Carlo p counts the observed assignment
    ((b + 1) / (N + 1), Phipson & Smyth 2010), so it is never 0; when 2^n <= permutations every flip is
    enumerated and p is exact.

    Written here rather than with scipy.stats.permutation_test (paired "samples" permutations are the same sign
    flips): scipy permutes both samples element by element, 15 s per comparison for MS MARCO's 6,980 queries and
    10,000 permutations; a flip is a matrix product here (under a second).
    """
    a, b = _paired(x, y)
    d = a - b
    n = len(d)
    observed = float(d.mean()) if n else 0.0
    if n == 0 or np.all(d == 0):
        return observed, 1.0
    reach = abs(observed) - 1e-12 * max(1.0, float(np.abs(d).max()))  # float slack for the observed assignment
    if n <= 24 and 2 ** n <= permutations:  # exact: every sign vector once, by the bits of 0 .. 2^n - 1
        hits = 0
        for start in range(0, 2 ** n, max(1, _BATCH_VALUES // n)):
            codes = np.arange(start, min(2 ** n, start + max(1, _BATCH_VALUES // n)), dtype=np.int64)
            flipped = ((codes[:, None] >> np.arange(n)) & 1).astype(bool)
            hits += int((np.abs(d.sum() - 2 * (flipped @ d)) / n >= reach).sum())
        return observed, hits / 2 ** n
    rng = np.random.default_rng(seed)
    hits, done, batch = 0, 0, max(1, _BATCH_VALUES // n)
    total = d.sum()
    while done < permutations:
        k = min(batch, permutations - done)
        flipped = rng.integers(0, 2, size=(k, n), dtype=np.int8).astype(bool)
        hits += int((np.abs(total - 2 * (flipped @ d)) / n >= reach).sum())
        done += k
    return observed, (hits + 1) / (permutations + 1)


def bootstrap_test(x: Sequence[float], y: Sequence[float], resamples: int = DEFAULT_RESAMPLES,
                   seed: int = DEFAULT_SEED) -> tuple[float, float]:
    """(t statistic, two-sided p) of the paired bootstrap test: the per-query differences are shifted to mean 0
    (the null hypothesis), resampled with replacement, and p is the share of resamples whose studentised mean
    |t*| reaches the observed |t| (Sakai 2006's form; (b + 1) / (B + 1) as for the randomization test)."""
    a, b = _paired(x, y)
    d = a - b
    n = len(d)
    if n == 0 or np.all(d == 0):
        return 0.0, 1.0
    if n < MIN_QUERIES or _constant(d):  # one query, or no spread: every resample is the observed one
        return math.nan, math.nan
    observed = _t(d[None, :])[0]
    z = d - d.mean()
    rng = np.random.default_rng(seed)
    hits, done, batch = 0, 0, max(1, _BATCH_VALUES // n)
    while done < resamples:
        k = min(batch, resamples - done)
        sample = z[rng.integers(0, n, size=(k, n))]
        hits += int((np.abs(_t(sample)) >= abs(observed) * (1 - 1e-12)).sum())
        done += k
    return float(observed), (hits + 1) / (resamples + 1)


def _constant(d: np.ndarray) -> bool:
    """Every difference the same (up to float rounding): no spread, so no t statistic (sd 0)."""
    return bool(np.ptp(d) <= 1e-12 * max(1.0, float(np.abs(d).max())))


def not_computable(name: str, x: Sequence[float], y: Sequence[float]) -> str | None:
    """Why the paired test `name` has no p-value on these samples (None: it has one). Identical samples always
    have one (p = 1: no difference is no evidence of one); otherwise every test needs `MIN_QUERIES` paired
    queries, and t and bootstrap (studentised) need differences that are not all equal."""
    a, b = _paired(x, y)
    d = a - b
    if len(d) and np.all(d == 0):
        return None
    if len(d) < MIN_QUERIES:
        return (f"not computable: {len(d)} paired quer{'y' if len(d) == 1 else 'ies'}, a paired test needs at least "
                f"{MIN_QUERIES}")
    if name in ("t", "bootstrap") and _constant(d):
        return "not computable: every query differs by the same amount (no variance for a t statistic)"
    return None


def _t(samples: np.ndarray) -> np.ndarray:
    """Row-wise t = mean / (sd / sqrt(n)); a row with sd 0 has t 0 (mean 0) or +-inf."""
    n = samples.shape[1]
    mean = samples.mean(axis=1)
    sd = samples.std(axis=1, ddof=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / (sd / math.sqrt(n))
    return np.where(sd > 0, t, np.where(mean == 0, 0.0, np.sign(mean) * np.inf))


@dataclass(frozen=True)
class PairedTest:
    """An experiment's `test:`: its name, and for the resampling tests the number of resamples and the seed."""

    name: str = "t"
    resamples: int = DEFAULT_RESAMPLES
    seed: int = DEFAULT_SEED

    def __post_init__(self) -> None:
        if self.name not in TESTS:
            raise ValueError(f"unknown paired test {self.name!r}; one of {TESTS}")

    @property
    def resampling(self) -> bool:
        return self.name in ("randomization", "bootstrap")

    def __call__(self, x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
        """(statistic, p) of x against y: the signature `pt.Experiment(test=...)` calls. Identical samples give
        p = 1; samples the test cannot use (`not_computable`) give NaN, never a p from a degenerate statistic
        (scipy's t on one query warns and returns NaN; the bootstrap's would be 1 / (B + 1))."""
        a, b = _paired(x, y)
        if len(a) and np.all(a == b):
            return 0.0, 1.0
        if self.why_not(a, b):
            return math.nan, math.nan
        if self.name == "randomization":
            return randomization_test(a, b, self.resamples, self.seed)
        if self.name == "bootstrap":
            return bootstrap_test(a, b, self.resamples, self.seed)
        from scipy import stats

        res = stats.ttest_rel(a, b) if self.name == "t" else stats.wilcoxon(a, b)
        return float(res.statistic), float(res.pvalue)

    def why_not(self, x: Sequence[float], y: Sequence[float]) -> str | None:
        """The note for a comparison without a p-value (`not_computable`), None when it has one."""
        return not_computable(self.name, x, y)

    def for_pyterrier(self) -> PairedTest:
        """The test as the callable `pt.Experiment(test=...)` takes, for every test: t and wilcoxon are scipy's
        ttest_rel and wilcoxon as PyTerrier's own names would call them (the same numbers), with p = 1 for
        identical systems and NaN where the sample is too small (PyTerrier's names give NaN and scipy warnings)."""
        return self

    def config(self) -> dict[str, Any]:
        return {"name": self.name, **({"resamples": self.resamples, "seed": self.seed} if self.resampling else {})}

    def describe(self) -> str:
        """The test in words, for captions and the manifest."""
        if self.name == "t":
            return "paired t-test"
        if self.name == "wilcoxon":
            return "Wilcoxon signed-rank test"
        if self.name == "randomization":
            return f"paired randomization test ({self.resamples:,} sign-flip permutations, seed {self.seed})"
        return f"paired bootstrap test ({self.resamples:,} resamples, seed {self.seed})"


def mcnemar_exact(a: Sequence[float], b: Sequence[float]) -> float:
    """Exact McNemar p-value for paired binary outcomes (two-sided binomial test on the discordant pairs)."""
    from scipy.stats import binomtest

    x, y = np.asarray(a) > 0.5, np.asarray(b) > 0.5
    n01, n10 = int(np.sum(~x & y)), int(np.sum(x & ~y))
    if n01 + n10 == 0:
        return 1.0
    return float(binomtest(n01, n01 + n10, 0.5).pvalue)


def bootstrap_mean(values: Sequence[float] | np.ndarray, n_resamples: int = BOOTSTRAP_B,
                   seed: int | Sequence[int] = BOOTSTRAP_SEED, confidence: float = 0.95) -> Any:
    """The one bootstrap of a mean in irgrid (the report's SEs and CIs, QA's CIs): items resampled with
    replacement from a seeded generator by scipy.stats.bootstrap (percentile method), or None for an empty or
    constant sample, which scipy refuses."""
    from scipy.stats import bootstrap

    x = np.asarray(values, dtype=float)
    if len(x) < 2 or np.all(x == x[0]):
        return None
    return bootstrap((x,), np.mean, n_resamples=n_resamples, vectorized=True, method="percentile",
                     confidence_level=confidence, rng=np.random.default_rng(seed))


def bootstrap_se(values: Sequence[float] | np.ndarray, n_resamples: int = BOOTSTRAP_B,
                 seed: int | Sequence[int] = BOOTSTRAP_SEED) -> float:
    """Bootstrap standard error of the mean of per-query values: the standard deviation (ddof=1) of the B
    resampled means, i.e. Efron and Tibshirani's SE_boot as used for the paper's Δσ (0 for a constant sample)."""
    res = bootstrap_mean(values, n_resamples, seed)
    if res is None:
        return 0.0 if len(values) else math.nan
    return float(res.standard_error)


def bootstrap_ci(values: Sequence[float], samples: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED,
                 alpha: float = 0.05) -> tuple[float, float]:
    """Percentile bootstrap interval of the mean (`bootstrap_mean`); the value itself for one item or equal
    items, NaN for none."""
    v = np.asarray(values, dtype=float)
    if len(v) == 0:
        return (float("nan"), float("nan"))
    res = bootstrap_mean(v, samples, seed, confidence=1 - alpha)
    if res is None:  # one item, or all equal: the interval is the value itself
        return (float(v[0]), float(v[0]))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def correct(pvalues: Sequence[float | None], method: str | None, alpha: float = 0.05) -> np.ndarray:
    """Corrected p-values of one family of tests (statsmodels' multipletests, as PyTerrier applies it); `none` or
    None leaves them as they are. NaNs (and Nones: no test) stay NaN and are not counted in the family."""
    p = np.asarray(pvalues, dtype=float)
    if not method or method == "none" or len(p) == 0:
        return p.copy()
    from statsmodels.stats.multitest import multipletests

    out = np.full_like(p, np.nan)
    ok = ~np.isnan(p)
    if ok.any():
        out[ok] = multipletests(p[ok], alpha=alpha, method=method)[1]
    return out


def describe_correction(method: str | None) -> str:
    names = {"holm": "Holm", "bonferroni": "Bonferroni", "holm-sidak": "Holm-Sidak", "hs": "Holm-Sidak",
             "sidak": "Sidak", "simes-hochberg": "Simes-Hochberg", "fdr_bh": "Benjamini-Hochberg (FDR)",
             "fdr_by": "Benjamini-Yekutieli (FDR)"}
    return "no correction" if method in (None, "none") else f"{names.get(method, method)} correction"
