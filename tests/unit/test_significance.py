"""Paired tests of irgrid.core.significance against exact enumeration of every sign flip (n <= 16), scipy's own
permutation test and Student's t; the experiment file's `test:` and `comparisons:`; k = 1 meta-analysis; the
report's LaTeX escaping."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from irgrid.core.significance import PairedTest, bootstrap_test, correct, randomization_test
from irgrid.runner.experiment import ExperimentError, from_dict


def exact_p(x: np.ndarray, y: np.ndarray) -> float:
    """The exact two-sided randomization p: every one of the 2^n sign vectors applied to the differences."""
    d = x - y
    signs = np.array(list(itertools.product((1.0, -1.0), repeat=len(d))))
    return float(np.mean(np.abs(signs @ d) >= abs(d.sum()) - 1e-12))


def _sample(n: int, shift: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query scores in [0, 1] like AP, with a true difference `shift`."""
    rng = np.random.default_rng(seed)
    y = rng.beta(2, 3, n)
    return np.clip(y + shift + rng.normal(0, 0.15, n), 0, 1), y


@pytest.mark.parametrize("n", [6, 9, 12, 16])
@pytest.mark.parametrize("shift", [0.0, 0.08])
def test_randomization_p_is_exact_enumeration_or_within_monte_carlo_error(n, shift):
    x, y = _sample(n, shift, seed=n)
    exact = exact_p(x, y)
    # asked for at least 2^n permutations: every flip enumerated, p exact
    assert randomization_test(x, y, permutations=2 ** n, seed=0)[1] == pytest.approx(exact, abs=1e-12)
    # fewer: Monte-Carlo, (b + 1) / (N + 1); within 4 standard errors of the exact p (plus the +1)
    for seed in (0, 1, 2):
        permutations = max(100, 2 ** n // 4)
        p = randomization_test(x, y, permutations=permutations, seed=seed)[1]
        se = math.sqrt(max(exact * (1 - exact), 1 / permutations) / permutations)
        assert abs(p - exact) <= 4 * se + 1 / (permutations + 1), (n, shift, seed, p, exact)


def test_randomization_is_seeded_and_symmetric_and_matches_scipy_exact():
    from scipy.stats import permutation_test

    x, y = _sample(11, 0.05, seed=3)
    assert randomization_test(x, y, 500, seed=7) == randomization_test(x, y, 500, seed=7)
    assert randomization_test(y, x, 500, seed=7)[1] == randomization_test(x, y, 500, seed=7)[1]
    theirs = permutation_test((x, y), lambda a, b, axis: np.mean(a - b, axis=axis), permutation_type="samples",
                              vectorized=True, n_resamples=np.inf, alternative="two-sided")
    assert randomization_test(x, y, 2 ** 11)[1] == pytest.approx(theirs.pvalue, abs=1e-9)
    assert randomization_test(x, x, 1000) == (0.0, 1.0)  # no difference at all: p = 1


def test_bootstrap_test_agrees_with_t_on_normal_differences_and_is_seeded():
    from scipy.stats import ttest_rel

    rng = np.random.default_rng(5)
    y = rng.normal(0.4, 0.1, 300)
    for shift in (0.0, 0.01, 0.02):
        x = y + shift + rng.normal(0, 0.1, 300)
        t, p = bootstrap_test(x, y, resamples=20_000, seed=0)
        ref = ttest_rel(x, y)
        assert t == pytest.approx(ref.statistic)  # the studentised statistic itself
        assert abs(p - ref.pvalue) < 0.02, (shift, p, ref.pvalue)  # the bootstrap null ~ Student's t here
    assert bootstrap_test(x, y, 1000, seed=1) == bootstrap_test(x, y, 1000, seed=1)


def test_paired_test_is_the_callable_pyterrier_gets_with_scipys_numbers():
    assert all(PairedTest(n).for_pyterrier() == PairedTest(n) for n in ("t", "wilcoxon"))
    rand = PairedTest("randomization", 2000, 3)
    assert rand.for_pyterrier() is rand and rand.config() == {"name": "randomization", "resamples": 2000, "seed": 3}
    assert "2,000 sign-flip permutations, seed 3" in rand.describe()
    from scipy.stats import ttest_rel

    x, y = _sample(30, 0.05, seed=1)
    assert PairedTest("t")(x, y)[1] == ttest_rel(x, y).pvalue
    from scipy.stats import wilcoxon

    assert PairedTest("wilcoxon")(x, y)[1] == wilcoxon(x, y).pvalue
    p = [0.01, 0.04, float("nan"), 0.03]
    from statsmodels.stats.multitest import multipletests

    expected = multipletests([0.01, 0.04, 0.03], method="holm")[1]
    got = correct(p, "holm")
    assert np.isnan(got[2]) and np.allclose(got[[0, 1, 3]], expected)
    assert np.allclose(correct(p, "none")[[0, 1, 3]], [0.01, 0.04, 0.03])


BASE = {"datasets": ["vaswani"], "retrievers": ["bm25-pisa", "bm25"], "measures": ["AP"]}


def test_experiment_test_and_comparisons_keys():
    spec = from_dict({**BASE, "test": {"name": "randomization", "permutations": 5000, "seed": 4},
                      "comparisons": "all-pairs"})
    assert (spec.test, spec.test_resamples, spec.test_seed, spec.comparisons) == ("randomization", 5000, 4, "all-pairs")
    assert spec.paired_test() == PairedTest("randomization", 5000, 4)
    assert spec.config()["test_options"] == {"resamples": 5000, "seed": 4}
    assert from_dict({**BASE, "test": "permutation"}).test == "randomization"
    assert from_dict({**BASE, "test": {"name": "bootstrap", "resamples": 2000}}).test_resamples == 2000
    plain = from_dict({**BASE, "test": "t"}).config()  # an experiment without the new keys keeps its hash
    assert "test_options" not in plain and "comparisons" not in plain


@pytest.mark.parametrize("test, message", [
    ("ranodmization", "Did you mean 'randomization'"),
    ({"name": "t", "permutations": 1000}, "'permutations' does not apply to the t test"),
    ({"name": "bootstrap", "permutations": 1000}, "it takes 'resamples'"),
    ({"name": "randomization", "permutations": 10}, "permutations must be a whole number >= 100"),
    ({"name": "randomization", "seed": -1}, "seed must be a whole number >= 0"),
    ({"name": "randomization", "perms": 10}, "unknown key(s) ['perms']"),
])
def test_experiment_refuses_a_bad_test(test, message):
    with pytest.raises(ExperimentError) as e:
        from_dict({**BASE, "test": test}, source="exp.yaml")
    assert message in str(e.value) and str(e.value).startswith("exp.yaml")


def test_experiment_refuses_unknown_comparisons():
    with pytest.raises(ExperimentError, match="comparisons: 'pairs' is not one of"):
        from_dict({**BASE, "comparisons": "pairs"})


def test_meta_analysis_of_one_dataset_reports_no_heterogeneity():
    from irgrid.report.stats import dersimonian_laird

    one = dersimonian_laird([0.02], [0.0001])
    assert one.k == 1 and one.effect == 0.02 and one.se == pytest.approx(0.01)
    assert math.isnan(one.q) and math.isnan(one.tau2) and math.isnan(one.i2)  # was I² = 1.00 on Q ~ 1e-31
    two = dersimonian_laird([0.02, 0.02], [0.0001, 0.0002])  # identical effects: no heterogeneity, not NaN
    assert two.i2 == 0.0 and two.tau2 == 0.0


def test_latex_escape_is_ascii_for_every_symbol_the_report_prints():
    from irgrid.report.render import LEGEND, tex_escape

    text = LEGEND + " Δσ τ² I² 0.30 ▲ ▼ Σ ⇈ ⇊ ↑ ↓ × ± α ≥ ≤ – — … Holm-Šidák naïve μ̂ †: deeper"
    out = tex_escape(text)
    assert out.isascii() and r"\ensuremath{\dagger}: deeper" in out  # † was printed as '?' (issue 41)
    for macro in (r"\upuparrows", r"\downdownarrows", r"\blacktriangle", r"\Sigma", r"\tau", r"\dagger"):
        assert macro in out


# -- issue 40 item 1: tiny samples and identical systems ----------------------------------------------------------
@pytest.mark.parametrize("name", ["t", "wilcoxon", "randomization", "bootstrap"])
def test_one_query_is_not_computable_without_warnings(name):
    """One query: no p-value (was 0.000999 and ▼ under bootstrap, NaN with scipy warnings under t)."""
    import warnings

    test = PairedTest(name, 1000, 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no scipy RuntimeWarning leaks
        stat, p = test([0.2], [0.6])
    assert math.isnan(p)
    assert "not computable: 1 paired query" in test.why_not([0.2], [0.6])


@pytest.mark.parametrize("name", ["t", "wilcoxon", "randomization", "bootstrap"])
@pytest.mark.parametrize("n", [1, 2, 40])
def test_identical_systems_get_p_one(name, n):
    import warnings

    x = np.linspace(0.1, 0.9, n)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert PairedTest(name, 1000, 0)(x, x.copy())[1] == 1.0
    assert PairedTest(name).why_not(x, x) is None


@pytest.mark.parametrize("name", ["t", "bootstrap"])
def test_equal_differences_have_no_t_statistic(name):
    """Two queries each 0.1 better: scipy's t said p = 1.8e-16 (float noise over sd 0); the bootstrap 1/(B+1)."""
    x, y = np.array([0.5, 0.4]), np.array([0.4, 0.3])
    assert math.isnan(PairedTest(name, 1000)(x, y)[1])
    assert "no variance" in PairedTest(name).why_not(x, y)
    assert PairedTest("randomization", 1000).why_not(x, y) is None  # sign flips need no variance


def test_bootstrap_test_function_itself_on_tiny_samples():
    assert math.isnan(bootstrap_test([0.3], [0.9])[1])
    assert bootstrap_test([0.3, 0.5], [0.3, 0.5]) == (0.0, 1.0)


def test_results_markdown_and_report_comparisons_note_untested_pairs():
    import pandas as pd

    from irgrid.report.stats import comparisons
    from irgrid.runner.outputs import markdown_table

    rows = [{"dataset": "d@q1s0", "system": s, "measure": "AP", "value": v, "p_value": None,
             "p_value_corrected": None, "significant": None, "baseline": "a", "beyond_depth": False, "n": 1,
             "p_note": None if s == "a" else PairedTest("bootstrap").why_not([v], [0.5])}
            for s, v in (("a", 0.5), ("b", 0.1))]
    text = markdown_table(pd.DataFrame(rows))
    assert "0.1000 §" in text and "▼" not in text.split("▲/▼")[0]
    assert "§: no p-value against the baseline" in text and "b AP (not computable: 1 paired query" in text
    # the report's all-pairs: identical systems p = 1, one query not computable with a note
    perq = pd.DataFrame([{"dataset": "d", "measure": "AP", "system": s, "qid": q, "value": v}
                         for s, vals in (("a", [0.2, 0.4, 0.6]), ("b", [0.2, 0.4, 0.6]), ("c", [0.1, 0.5, 0.9]))
                         for q, v in zip("xyz", vals)])
    res = pd.DataFrame([{"dataset": "d", "system": s, "measure": "AP", "value": 0.4, "p_value": None,
                         "p_value_corrected": None} for s in "abc"])
    for name in ("t", "wilcoxon", "bootstrap", "randomization"):
        comp = comparisons(perq, res, PairedTest(name, 1000), "holm", "a", mode="all-pairs")
        ab = comp[(comp["system"] == "b") & (comp["against"] == "a")].iloc[0]
        assert ab["p"] == 1.0 and ab["p_corrected"] == 1.0 and not ab["significant"], name
    one = perq[perq["qid"] == "x"].assign(value=lambda f: f["value"] + (f["system"] == "c") * 0.3)
    comp = comparisons(one, res, PairedTest("bootstrap", 1000), "holm", "a", mode="all-pairs")
    row = comp[comp["system"] == "c"].iloc[0]
    assert math.isnan(row["p"]) and row["significant"] is None and "not computable" in row["p_note"]
