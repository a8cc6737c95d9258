"""Statistical power and the minimum detectable effect (MDE) of paired comparisons over queries.

A grid of 50-300 queries can only separate differences above some size. From the per-query differences of a pair
of systems (their standard deviation sd), the paired t-test at level alpha with n queries has power

    power(delta) = P(|T'| > t_{1 - alpha/2, n-1}),   T' ~ noncentral t(n - 1, delta * sqrt(n) / sd)

and the MDE is the delta where that power is 80% (exact noncentral t, scipy; not the normal approximation). For
the randomization, bootstrap and Wilcoxon tests the t-test's power is the stated approximation (they agree closely
for n >= 30 on IR differences, whose distribution is bounded).

A correction family lowers the level each comparison is held to; `family_alpha` gives the per-comparison level that
the correction applies to the smallest p-value of m tests (Bonferroni and Holm's first step alpha / m, Sidak's
1 - (1 - alpha)^(1/m), Benjamini-Hochberg's (its worst case) alpha / m, Benjamini-Yekutieli alpha / (m H_m)): the
MDE "after correction" is the MDE at that level, the effect a single comparison needs to survive the correction.
"""

from __future__ import annotations

import math

TARGET_POWER = 0.8
POWER_TEST = "paired t-test (noncentral t)"


def family_alpha(alpha: float, m: int, method: str | None) -> float:
    """The per-comparison level of the first (strictest) step of `method` over a family of m tests."""
    if m <= 1 or method in (None, "none"):
        return alpha
    if method in ("sidak", "holm-sidak", "hs"):
        return 1 - (1 - alpha) ** (1 / m)
    if method == "fdr_by":
        return alpha / (m * sum(1 / i for i in range(1, m + 1)))
    if method in ("bonferroni", "holm", "simes-hochberg", "fdr_bh"):
        return alpha / m
    raise ValueError(f"unknown correction {method!r}")


def power(effect: float, sd: float, n: int, alpha: float = 0.05) -> float:
    """Power of the two-sided paired t-test with n queries to detect a true mean difference `effect` when the
    per-query differences have standard deviation `sd`."""
    from scipy import stats

    if n < 2 or math.isnan(sd) or math.isnan(effect):
        return math.nan
    if sd == 0:
        return 1.0 if effect != 0 else alpha
    df = n - 1
    crit = float(stats.t.ppf(1 - alpha / 2, df))
    nc = abs(effect) * math.sqrt(n) / sd
    # the far tail as sf at -nc: scipy's nct.cdf returns NaN there for large nc (13.7 at df 299), sf gives 0
    return float(stats.nct.sf(crit, df, nc) + stats.nct.sf(crit, df, -nc))


def mde(sd: float, n: int, alpha: float = 0.05, target: float = TARGET_POWER) -> float:
    """The smallest true mean difference the paired t-test detects with probability `target` (default 80%) at
    level alpha over n queries whose differences have standard deviation sd. 0 for sd 0 (every nonzero constant
    difference is detected), NaN below two queries."""
    from scipy.optimize import brentq

    if n < 2 or math.isnan(sd):
        return math.nan
    if sd == 0:
        return 0.0
    hi = sd
    while power(hi, sd, n, alpha) < target:
        hi *= 2
    return float(brentq(lambda d: power(d, sd, n, alpha) - target, 0.0, hi, xtol=1e-12 * sd, rtol=1e-12))
