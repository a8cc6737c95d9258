"""Power and MDE (irgrid.core.power): predicted power against the rejection rate of the paired t-test on simulated
paired data with known effects, n = 50 and n = 300; the correction family's level."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from irgrid.core import power

REPLICATES = 4000


def _rejections(d: np.ndarray, alpha: float) -> float:
    return float((stats.ttest_1samp(d, 0.0, axis=1).pvalue < alpha).mean())


@pytest.mark.parametrize("n", [50, 300])
@pytest.mark.parametrize("alpha", [0.05, 0.05 / 6])
def test_empirical_power_within_5_points_of_predicted(n, alpha):
    """Normal differences at the MDE (80% predicted), at half of it and at 1.5 times it: the t-test's rejection
    rate over 4,000 simulated experiments is within 5 percentage points of `power.power`."""
    rng = np.random.default_rng(n + int(alpha * 1e6))
    sd = 0.2
    mde = power.mde(sd, n, alpha)
    assert power.power(mde, sd, n, alpha) == pytest.approx(0.8, abs=1e-9)
    for effect in (mde, 0.5 * mde, 1.5 * mde):
        d = rng.normal(effect, sd, size=(REPLICATES, n))
        predicted = power.power(effect, sd, n, alpha)
        assert abs(_rejections(d, alpha) - predicted) < 0.05, (n, alpha, effect, predicted)


@pytest.mark.parametrize("n", [50, 300])
def test_empirical_power_on_ir_like_differences(n):
    """Per-query differences as IR produces them (many exact zeros, bounded, skewed): 45% zeros, the rest a
    shifted beta on [-1, 1]. Predicted from the population mean and sd; within 5 points at the MDE."""
    rng = np.random.default_rng(7 + n)

    def draw(shift: float, size) -> np.ndarray:
        nonzero = rng.random(size) >= 0.45
        return np.where(nonzero, np.clip(2 * rng.beta(2, 2, size) - 1 + shift, -1, 1), 0.0)

    population = draw(0.0, 400_000)
    sd = float(population.std())
    effect = power.mde(sd, n, 0.05)
    shift = effect / 0.55  # only the non-zero 55% carry the shift (no clipping reached at these sizes)
    sample = draw(shift, (REPLICATES, n))
    mean, sd_true = float(draw(shift, 400_000).mean()), float(draw(shift, 400_000).std())
    predicted = power.power(mean, sd_true, n, 0.05)
    assert abs(_rejections(sample, 0.05) - predicted) < 0.05


def test_mde_shrinks_with_queries_and_grows_with_the_family():
    assert power.mde(0.2, 300, 0.05) < power.mde(0.2, 50, 0.05)
    assert power.mde(0.2, 50, power.family_alpha(0.05, 10, "holm")) > power.mde(0.2, 50, 0.05)
    assert power.mde(0.0, 50) == 0.0 and np.isnan(power.mde(0.2, 1))


def test_family_alpha():
    assert power.family_alpha(0.05, 4, "bonferroni") == power.family_alpha(0.05, 4, "holm") == 0.0125
    assert power.family_alpha(0.05, 4, "sidak") == pytest.approx(1 - 0.95 ** 0.25)
    assert power.family_alpha(0.05, 4, None) == 0.05 == power.family_alpha(0.05, 1, "holm")
    assert power.family_alpha(0.05, 3, "fdr_by") == pytest.approx(0.05 / (3 * (1 + 1 / 2 + 1 / 3)))
    with pytest.raises(ValueError, match="unknown correction"):
        power.family_alpha(0.05, 3, "nonsense")
