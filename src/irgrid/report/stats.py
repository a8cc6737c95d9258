"""Analyses of a stored grid's per-query scores (paper Sections 4.1.2 and 4.3): bootstrap standard errors,
win/tie/loss counts, paired comparisons and a random-effects (DerSimonian-Laird) meta-analysis across datasets.
The statistics themselves (bootstrap, paired tests, correction) are irgrid.core.significance's, shared with QA."""

from __future__ import annotations

import math
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from irgrid.core.significance import BOOTSTRAP_B, BOOTSTRAP_SEED, PairedTest, bootstrap_mean, correct


def _cell_seed(seed: int, dataset: str, measure: str) -> list[int]:
    # One stream per (dataset, measure), shared by all systems: every system is resampled on the same
    # bootstrap query samples (common random numbers), and the result does not depend on the grid's order.
    return [seed, zlib.crc32(f"{dataset}\t{measure}".encode())]


def bootstrap_table(perquery: pd.DataFrame, n_resamples: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED) -> pd.DataFrame:
    """Per (dataset, system, measure): mean of the per-query values, its bootstrap SE and 95% percentile confidence
    interval (one bootstrap), #queries, B and seed."""
    rows = []
    for (dataset, system, measure), block in perquery.groupby(["dataset", "system", "measure"], sort=False):
        values = block["value"].dropna().to_numpy(dtype=float)
        res = bootstrap_mean(values, n_resamples, _cell_seed(seed, dataset, measure))
        mean = float(values.mean()) if len(values) else math.nan
        se = float(res.standard_error) if res is not None else (0.0 if len(values) else math.nan)
        low, high = (float(res.confidence_interval.low), float(res.confidence_interval.high)) if res is not None \
            else (mean, mean)
        rows.append({"dataset": dataset, "system": system, "measure": measure, "mean": mean, "se": se,
                     "ci_low": low, "ci_high": high, "queries": len(values), "B": n_resamples, "seed": seed})
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "mean", "se", "ci_low", "ci_high", "queries",
                                       "B", "seed"])


def win_tie_loss(results: pd.DataFrame) -> pd.DataFrame:
    """Per (system, measure) against the baseline: datasets where it is significantly better (win), worse (loss)
    or neither (tie), using the corrected paired tests already in results.csv."""
    rows = []
    res = results[(results["measure"] != "ms/query") & results["baseline"].notna()]
    for (system, measure), block in res.groupby(["system", "measure"], sort=False):
        if (block["system"] == block["baseline"]).all():
            continue
        w = t = lo = missing = 0
        for _, r in block.iterrows():
            base = res[(res["dataset"] == r["dataset"]) & (res["system"] == r["baseline"]) & (res["measure"] == measure)]
            if base.empty:  # the baseline failed there: not a tie (issue 32: a failed baseline read 0/0/0)
                missing += 1
                continue
            sig = r["significant"] is True or str(r["significant"]).lower() == "true"
            if sig and r["value"] > base["value"].iloc[0]:
                w += 1
            elif sig and r["value"] < base["value"].iloc[0]:
                lo += 1
            else:
                t += 1
        rows.append({"system": system, "measure": measure, "baseline": block["baseline"].iloc[0],
                     "win": w, "tie": t, "loss": lo, "datasets": w + t + lo, "baseline_missing": missing})
    return pd.DataFrame(rows, columns=["system", "measure", "baseline", "win", "tie", "loss", "datasets",
                                       "baseline_missing"])


@dataclass(frozen=True)
class MetaResult:
    k: int
    effect: float  # the random-effects pooled effect
    se: float
    ci_low: float
    ci_high: float
    z: float
    p: float
    tau2: float
    q: float
    i2: float
    fixed_effect: float


def dersimonian_laird(effects: Sequence[float], variances: Sequence[float]) -> MetaResult:
    """DerSimonian–Laird random-effects pooling. With one study (k = 1) Q, τ² and I² are NaN: there is no
    heterogeneity to report, and the pooled effect is that study's.

    Written here rather than taken from statsmodels: its `combine_effects(method_re='dl')` (0.15) does not
    truncate τ² at zero (negative τ² inflates the weights) and divides by zero for a single study.
    """
    from scipy.stats import norm

    y, v = np.asarray(effects, dtype=float), np.asarray(variances, dtype=float)
    k = len(y)
    w = 1 / v
    fixed = float((w * y).sum() / w.sum())
    q = float((w * (y - fixed) ** 2).sum())
    c = float(w.sum() - (w ** 2).sum() / w.sum())
    if k == 1:  # one study: no between-study variance to estimate (Q = 0 up to rounding, I² undefined)
        q = tau2 = i2 = math.nan
    else:
        tau2 = max(0.0, (q - (k - 1)) / c) if c > 0 else 0.0
        i2 = max(0.0, (q - (k - 1)) / q) if q > 0 else 0.0
    w_re = 1 / (v + (0.0 if k == 1 else tau2))
    effect = float((w_re * y).sum() / w_re.sum())
    se = float(math.sqrt(1 / w_re.sum()))
    z = effect / se if se > 0 else math.copysign(math.inf, effect) if effect else 0.0
    crit = float(norm.ppf(0.975))
    return MetaResult(k=k, effect=effect, se=se, ci_low=effect - crit * se, ci_high=effect + crit * se, z=z,
                      p=float(2 * norm.sf(abs(z))), tau2=tau2, q=q, i2=i2, fixed_effect=fixed)


def paired_effects(perquery: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Per (dataset, system, measure): the mean per-query difference to the baseline and its variance
    (var(d) / n over the queries both were evaluated on) — the per-dataset effect sizes for the meta-analysis."""
    rows = []
    for (dataset, measure), block in perquery.groupby(["dataset", "measure"], sort=False):
        wide = block.pivot_table(index="qid", columns="system", values="value")
        if baseline not in wide.columns:
            continue
        for system in wide.columns:
            if system == baseline:
                continue
            d = (wide[system] - wide[baseline]).dropna().to_numpy()
            if len(d) < 2:
                continue
            rows.append({"dataset": dataset, "system": system, "measure": measure, "effect": float(d.mean()),
                         "variance": float(d.var(ddof=1) / len(d)), "queries": len(d)})
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "effect", "variance", "queries"])


def meta_analysis(perquery: pd.DataFrame, baseline: str) -> pd.DataFrame:
    """Random-effects (DerSimonian–Laird) pooled difference to the baseline per (system, measure) across datasets."""
    effects = paired_effects(perquery, baseline)
    rows = []
    for (system, measure), block in effects.groupby(["system", "measure"], sort=False):
        block = block[block["variance"] > 0]
        if block.empty:
            continue
        r = dersimonian_laird(block["effect"], block["variance"])
        rows.append({"system": system, "measure": measure, "baseline": baseline, **r.__dict__,
                     "datasets": " ".join(block["dataset"])})
    cols = ["system", "measure", "baseline", *MetaResult.__dataclass_fields__, "datasets"]
    return pd.DataFrame(rows, columns=cols)


def pairs(names: Sequence[str]) -> list[tuple[str, str]]:
    """Unordered pairs of distinct names, in order."""
    return list(combinations(names, 2))


COMPARISON_COLUMNS = ["dataset", "measure", "system", "against", "n", "mean", "mean_against", "diff", "ci_low",
                      "ci_high", "effect_d", "p", "p_corrected", "significant", "family", "p_from", "p_note"]


def comparisons(perquery: pd.DataFrame, results: pd.DataFrame, test: PairedTest, correction: str | None,
                baseline: str | None, mode: str = "baseline", n_resamples: int = BOOTSTRAP_B,
                seed: int = BOOTSTRAP_SEED, alpha: float = 0.05) -> pd.DataFrame:
    """Paired comparisons per (dataset, measure) with effect sizes: the mean difference (system − against) with its
    95% bootstrap percentile CI (B resamples of the queries, seeded), the standardised effect d = mean(d) / sd(d)
    (Cohen's d for paired samples, d_z), the experiment's test p and the corrected p.

    mode "baseline": each system against the baseline, p and corrected p read from results.csv (what pt.Experiment
    computed: the numbers and the family, the systems compared with the baseline, are the grid's own).
    mode "all-pairs": every pair of systems, tested with the same test (a pair with the baseline keeps
    results.csv's p), corrected together over all pairs of the (dataset, measure).
    """
    res = results[results["measure"] != "ms/query"]
    stored = {(r["dataset"], r["system"], r["measure"]): (r["p_value"], r["p_value_corrected"])
              for _, r in res.iterrows()}
    rows = []
    for (dataset, measure), block in perquery.groupby(["dataset", "measure"], sort=False):
        wide = block.pivot_table(index="qid", columns="system", values="value", sort=True)
        systems = [s for s in dict.fromkeys(block["system"]) if s in wide.columns]
        if mode == "all-pairs":
            pairs_ = [(b, a) for a, b in combinations(systems, 2)]
        elif baseline in systems:
            pairs_ = [(s, baseline) for s in systems if s != baseline]
        else:
            continue
        family = []
        for system, against in pairs_:
            both = wide[[system, against]].dropna()
            x, y = both[system].to_numpy(), both[against].to_numpy()
            d = x - y
            if len(d) == 0:
                continue
            ci = bootstrap_mean(d, n_resamples, _cell_seed(seed, dataset, measure))
            low, high = (float(ci.confidence_interval.low), float(ci.confidence_interval.high)) if ci is not None \
                else (float(d.mean()), float(d.mean()))
            sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
            p_stored = stored.get((dataset, system, measure), (None, None)) if against == baseline else (None, None)
            if p_stored[0] is not None and not pd.isna(p_stored[0]):
                p, p_from = float(p_stored[0]), "results.csv"
            else:
                p, p_from = test(x, y)[1], "report"
            family.append({"dataset": dataset, "measure": measure, "system": system, "against": against,
                           "n": len(d), "mean": float(x.mean()), "mean_against": float(y.mean()),
                           "diff": float(d.mean()), "ci_low": low, "ci_high": high,
                           "effect_d": float(d.mean() / sd) if sd > 0 else (0.0 if d.mean() == 0 else math.nan),
                           "p": p, "p_from": p_from, "_stored_pc": p_stored[1],
                           "p_note": test.why_not(x, y)})  # no p-value: why (too few queries for the test)
        if mode == "baseline" and all(r["p_from"] == "results.csv" for r in family):
            corrected = [float(r["_stored_pc"]) if r["_stored_pc"] is not None and not pd.isna(r["_stored_pc"])
                         else math.nan for r in family]
        else:
            corrected = list(correct([r["p"] for r in family], correction, alpha))
        for r, pc in zip(family, corrected):
            r.pop("_stored_pc")
            rows.append({**r, "p_corrected": pc, "significant": bool(pc < alpha) if not math.isnan(pc) else None,
                         "family": f"{len(family)} {'pairs' if mode == 'all-pairs' else 'systems vs ' + str(baseline)}"})
    return pd.DataFrame(rows, columns=COMPARISON_COLUMNS)
