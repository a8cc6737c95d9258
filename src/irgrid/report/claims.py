"""`irgrid claims OUT`: each claim of an experiment's `claims:` block (irgrid.core.claims) checked against a stored
grid, as supported / contradicted / inconclusive at the claim's alpha, with the effect, its CI, p, n, and the cells
the check needed that the grid lacks.

The checks (docs/claims.md says the same in words):
- beats: the experiment's paired test (manifest `statistics`) on the per-query values; the CI is the percentile
  bootstrap of the mean difference.
- beats_on_average / an aggregate target: the group's weighted mean of per-dataset mean differences (the paper's
  aggregation, irgrid.paper.Column weights); SE = sqrt(Σ w² sd_i² / n_i) of the paired differences; z test.
- best (at least k of the targets), rank: A against every other system of the claim (`among`, default the
  experiment's retrievers), corrected within the claim by the experiment's correction. The rank interval is
  [1 + #significantly better, 1 + #others − #significantly worse] (a system the grid lacks widens it).
- equivalent: two one-sided tests (TOST) on the paired differences against ±delta (t, or z for a group); its
  (1 − 2α) interval.
- latency: ratio of summed ms/query over the datasets both have; with a latency pass (`irgrid run --latency`) the
  ratio's range from the rounds' min/max decides, without one the single measurement does (basis "point").
- jaccard: mean within-group minus mean across-group Jaccard of hard-query sets (the report's failure points), a
  one-sided label-permutation test over the systems.

A claim is one hypothesis: its tests are corrected within it, not across the block, so adding a claim never changes
another's verdict (what `irgrid diff` relies on). Without per-query values a test has no p: the claim says
"inconclusive" and names the per-query cells it needs; its effect from the means is still shown.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from irgrid import paper
from irgrid.core.claims import Claim, ClaimError, Target, parse
from irgrid.core.significance import BOOTSTRAP_B, BOOTSTRAP_SEED, PairedTest, bootstrap_ci, correct
from irgrid.report.stored import Grid
from irgrid.util.errors import Error

SUPPORTED, CONTRADICTED, INCONCLUSIVE = "supported", "contradicted", "inconclusive"


class ClaimsError(Error, ValueError):
    pass


@dataclass
class Verdict:
    """One claim's outcome. `effect` is on the measure's scale (a ratio for latency, a rank for rank claims)."""

    id: str
    text: str
    source: str
    form: str
    verdict: str
    effect: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p: float | None = None
    n: int | None = None
    alpha: float = 0.05
    detail: str = ""
    lacking: list[str] = field(default_factory=list)
    basis: str = "per-query"  # per-query | means | point | spread | runs

    def row(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Comparison:
    """A − B over a target: effect (mean difference, aggregated), its SE and CI, p (two-sided), n (queries)."""

    effect: float | None
    p: float | None = None
    ci: tuple[float, float] | None = None
    se: float | None = None
    n: int = 0
    lacking: list[str] = field(default_factory=list)
    t_based: bool = True  # one dataset (t / the experiment's test); False: a group's z


# -- the grid's data -----------------------------------------------------------------------------------------------
class GridData:
    """Lookups over a stored grid: means, per-query vectors (paired by qid), default measures, dataset names."""

    def __init__(self, grid: Grid, bootstrap: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED,
                 zero_shot: bool = False):
        self.grid = grid
        self.zero_shot = zero_shot  # only cells known to be zero-shot (irgrid.core.training) count
        self.bootstrap, self.seed = bootstrap, seed
        res = grid.results
        self.values = {(str(d), str(s), str(m)): float(v)
                       for d, s, m, v in zip(res["dataset"], res["system"], res["measure"], res["value"])
                       if not pd.isna(v)}
        self._blocks = {k: b for k, b in grid.perquery.groupby(["dataset", "measure"], sort=False)} \
            if len(grid.perquery) else {}
        self._wide: dict[tuple[str, str], pd.DataFrame | None] = {}
        self._matrix: dict[tuple[str, str], tuple[np.ndarray, dict[str, int]] | None] = {}
        self.names = {paper.canonical(d): d for d in dict.fromkeys(res["dataset"].astype(str))}
        stats = grid.manifest.get("statistics") or {}
        test = stats.get("test") or {"name": "t"}
        test = {"name": test} if isinstance(test, str) else test
        self.test = PairedTest(str(test.get("name", "t")), int(test.get("resamples", 10_000)),
                               int(test.get("seed", 0)))
        self.correction = stats.get("correction") or "none"
        self.systems = list(dict.fromkeys(res["system"].astype(str)))

    @functools.cache  # noqa: B019 - one GridData per evaluation, few names
    def dataset(self, name: str) -> str:
        """The grid's name for a dataset (an alias or a query subset of it counts), else the name itself."""
        return self.names.get(paper.canonical(name), name)

    @functools.cache  # noqa: B019
    def measure(self, dataset: str) -> str | None:
        """The dataset's first measure: as the manifest records it, else results.csv's, else the catalog's."""
        recorded = (self.grid.manifest.get("datasets") or {}).get(self.dataset(dataset), {}).get("measures")
        if recorded:
            return str(recorded[0])
        name = self.dataset(dataset)
        found = next((m for (d, _, m) in self.values if d == name and m != "ms/query"), None)
        return found or paper.dataset_measures().get(paper.canonical(dataset), (None,))[0]

    def wide(self, dataset: str, measure: str) -> pd.DataFrame | None:
        key = (self.dataset(dataset), measure)
        if key not in self._wide:
            block = self._blocks.get(key)
            self._wide[key] = None if block is None else block.pivot_table(index="qid", columns="system",
                                                                           values="value", sort=True)
        return self._wide[key]

    def matrix(self, dataset: str, measure: str) -> tuple[np.ndarray, dict[str, int]] | None:
        """The per-query values as a (queries x systems) array with NaN where a system has no value, and the
        column of each system (numpy: a claim block compares hundreds of pairs)."""
        key = (self.dataset(dataset), measure)
        if key not in self._matrix:
            wide = self.wide(dataset, measure)
            self._matrix[key] = None if wide is None else (wide.to_numpy(dtype=float),
                                                           {str(s): i for i, s in enumerate(wide.columns)})
        return self._matrix[key]

    def paired(self, dataset: str, measure: str, a: str, b: str) -> tuple[np.ndarray, np.ndarray] | None:
        found = self.matrix(dataset, measure)
        if found is None or a not in found[1] or b not in found[1]:
            return None
        x, y = found[0][:, found[1][a]], found[0][:, found[1][b]]
        both = ~(np.isnan(x) | np.isnan(y))
        return x[both], y[both]

    def excluded(self, dataset: str, system: str) -> str | None:
        """Why a cell does not count in zero-shot mode ('in-domain', 'training unknown'), else None."""
        if not self.zero_shot:
            return None
        from irgrid.core.training import in_domain

        known = in_domain(system, self.dataset(dataset))
        return None if known is False else "in-domain" if known else "training unknown"

    def has(self, dataset: str, system: str, measure: str) -> bool:
        return (self.dataset(dataset), system, measure) in self.values and self.excluded(dataset, system) is None

    def why(self, dataset: str, system: str, measure: str) -> str:
        """A missing cell in words: the cell, and when it is there but does not count, why."""
        reason = self.excluded(dataset, system)
        return _cell(dataset, system, measure) + (f" ({reason})" if reason else "")

    def mean(self, dataset: str, system: str, measure: str) -> float | None:
        return self.values.get((self.dataset(dataset), system, measure))

    def components(self, target: Target) -> list[tuple[str, str, float]]:
        """(dataset, measure, weight) of a target: one dataset (1), an aggregate (the paper's weights), or a list
        of datasets (equal weights)."""
        if target.aggregate:
            return [(d, m, w) for d, m, w in paper.AGGREGATES[target.names[0]].column.weights()]
        out = []
        for d in target.names:
            m = target.measure or self.measure(d)
            out.append((d, m or "?", 1.0 / len(target.names)))
        return out


def _cell(d: str, s: str, m: str) -> str:
    return f"{d} {s} {m}"


def compare(data: GridData, a: str, b: str, target: Target, alpha: float, ci: bool = True) -> Comparison:
    """A − B over a target (see the module's docstring); `ci` False skips the bootstrap CI of one dataset's
    difference (the many comparisons of best and rank claims need only the test)."""
    parts = data.components(target)
    if data.zero_shot and len(parts) > 1:  # a group on the members both are zero-shot on, re-weighted
        kept = [(d, m, w) for d, m, w in parts if data.excluded(d, a) is None and data.excluded(d, b) is None]
        if kept and len(kept) < len(parts):
            total = sum(w for *_, w in kept)
            parts = [(d, m, w / total) for d, m, w in kept]
    lacking = [data.why(d, s, m) for d, m, _ in parts for s in (a, b) if not data.has(d, s, m)]
    if lacking:
        return Comparison(None, lacking=lacking)
    effect = sum(w * (data.mean(d, a, m) - data.mean(d, b, m)) for d, m, w in parts)  # type: ignore[operator]
    pairs = [(d, m, w, data.paired(d, m, a, b)) for d, m, w in parts]
    unpaired = [(d, m) for d, m, _, p in pairs if p is None or len(p[0]) == 0]
    if unpaired:  # the means give the effect; a test needs per-query values of both, on shared queries
        found = {(d, m): data.matrix(d, m) for d, m in unpaired}
        no_pq = [f"per-query {_cell(d, s, m)}" for d, m in unpaired for s in (a, b)
                 if found[(d, m)] is None or s not in found[(d, m)][1]]
        return Comparison(effect, lacking=no_pq or [f"per-query values shared by {a} and {b} on {target.label}"])
    if len(parts) == 1:
        x, y = pairs[0][3]  # type: ignore[misc]
        diff = x - y
        effect = float(diff.mean())
        p = _p(data.test, x, y)
        interval = bootstrap_ci(diff, data.bootstrap, data.seed, alpha) if ci else None
        se = float(diff.std(ddof=1) / math.sqrt(len(diff))) if len(diff) > 1 else None
        return Comparison(effect, p, interval, se, len(diff))
    effect, var, n = 0.0, 0.0, 0
    for _d, _m, w, (x, y) in pairs:  # type: ignore[misc]
        diff = x - y
        effect += w * float(diff.mean())
        var += (w ** 2) * (float(diff.var(ddof=1)) / len(diff) if len(diff) > 1 else math.inf)
        n += len(diff)
    se = math.sqrt(var)
    from scipy.stats import norm

    if se == 0:
        p = 1.0 if effect == 0 else 0.0
    else:
        p = float(2 * norm.sf(abs(effect) / se)) if math.isfinite(se) else 1.0
    zq = float(norm.ppf(1 - alpha / 2))
    return Comparison(effect, p, (effect - zq * se, effect + zq * se), se, n, t_based=False)


def _p(test: PairedTest, x: np.ndarray, y: np.ndarray) -> float | None:
    if len(x) < 2:
        return None
    if np.all(x - y == 0):
        return 1.0
    p = test(x, y)[1]
    return None if p is None or math.isnan(p) else float(p)


def _directional(effect: float, p: float | None, alpha: float) -> str:
    if p is None or p >= alpha or effect == 0:
        return INCONCLUSIVE
    return SUPPORTED if effect > 0 else CONTRADICTED


# -- the forms ----------------------------------------------------------------------------------------------------
def check_beats(data: GridData, c: Claim) -> Verdict:
    a, b = c.args["a"], c.args["b"]
    cmp = compare(data, a, b, c.targets[0], c.alpha)
    return _from_comparison(c, cmp, f"{a} − {b} on {c.targets[0].label}")


def _from_comparison(c: Claim, cmp: Comparison, what: str) -> Verdict:
    v = Verdict(c.id, c.text, c.source, c.form, INCONCLUSIVE, cmp.effect, alpha=c.alpha, n=cmp.n or None,
                lacking=cmp.lacking)
    if cmp.effect is None:
        v.detail, v.basis = f"{what}: the grid lacks cells", "none"
        return v
    if cmp.p is None:
        v.basis = "means"
        v.detail = f"{what} = {cmp.effect:+.4f} from the means; no test without per-query values"
        return v
    v.p, (v.ci_low, v.ci_high) = cmp.p, cmp.ci  # type: ignore[misc]
    v.verdict = _directional(cmp.effect, cmp.p, c.alpha)
    v.detail = f"{what} = {cmp.effect:+.4f} ({'paired test' if cmp.t_based else 'z test of the group mean'})"
    return v


def _others(data: GridData, c: Claim, system: str, universe: Sequence[str]) -> list[str]:
    among = c.args.get("among") or list(universe) or data.systems
    return [s for s in dict.fromkeys(among) if s != system]


def _versus_all(data: GridData, c: Claim, system: str, target: Target, universe: Sequence[str]
                ) -> tuple[list[tuple[str, Comparison, float]], list[str], list[str]]:
    """system against every other: [(other, comparison, corrected p)], others the grid lacks (cells), and the
    per-query cells missing for tests."""
    rows, absent, untested = [], [], []
    for other in _others(data, c, system, universe):
        cmp = compare(data, system, other, target, c.alpha, ci=False)
        if cmp.effect is None:
            absent.append(other)
            untested += [x for x in cmp.lacking if other in x]
        else:
            rows.append((other, cmp))
            untested += cmp.lacking
    corrected = correct([r[1].p for r in rows], data.correction, c.alpha)
    return [(o, cmp, float(pc)) for (o, cmp), pc in zip(rows, corrected)], absent, untested


def check_best(data: GridData, c: Claim, universe: Sequence[str]) -> Verdict:
    system = c.args["system"]
    k = int(c.args.get("at_least", len(c.targets)))
    best, beaten, lines, lacking, untested_any = 0, 0, [], [], False
    for t in c.targets:
        if any(not data.has(d, system, m) for d, m, _ in data.components(t)) and not (
                data.zero_shot and len(data.components(t)) > 1
                and any(data.has(d, system, m) for d, m, _ in data.components(t))):
            lacking += [data.why(d, system, m) for d, m, _ in data.components(t) if not data.has(d, system, m)]
            lines.append(f"{t.label}: no cell")
            continue
        rows, absent, untested = _versus_all(data, c, system, t, universe)
        lacking += untested
        untested_any |= any(cmp.p is None for _, cmp, _ in rows)
        sig_better = [o for o, cmp, pc in rows if not math.isnan(pc) and pc < c.alpha and cmp.effect < 0]
        sig_worse = [o for o, cmp, pc in rows if not math.isnan(pc) and pc < c.alpha and cmp.effect > 0]
        if sig_better:
            beaten += 1
            lines.append(f"{t.label}: beaten by {', '.join(sig_better)}")
        elif len(sig_worse) == len(rows) and not absent and rows:
            best += 1
            lines.append(f"{t.label}: significantly best of {len(rows) + 1}")
        else:
            top = [o for o, cmp, _ in rows if cmp.effect is not None and cmp.effect < 0]
            lines.append(f"{t.label}: undecided ({len(sig_worse)}/{len(rows)} significantly worse"
                         + (f"; higher mean: {', '.join(top)}" if top else "")
                         + (f"; grid lacks {len(absent)} systems" if absent else "") + ")")
            lacking += [f"{o} on {t.label}" for o in absent]
    n_targets = len(c.targets)
    verdict = SUPPORTED if best >= k else CONTRADICTED if n_targets - beaten < k else INCONCLUSIVE
    return Verdict(c.id, c.text, c.source, c.form, verdict, float(best), float(best), float(n_targets - beaten),
                   n=n_targets, alpha=c.alpha, lacking=list(dict.fromkeys(lacking)),
                   detail=f"significantly best on {best}, beaten on {beaten} of {n_targets} (needs {k}); "
                          + "; ".join(lines), basis="means" if untested_any else "per-query")


def check_rank(data: GridData, c: Claim, universe: Sequence[str]) -> Verdict:
    system, t = c.args["system"], c.targets[0]
    if any(not data.has(d, system, m) for d, m, _ in data.components(t)) and not (
            data.zero_shot and len(data.components(t)) > 1
            and any(data.has(d, system, m) for d, m, _ in data.components(t))):
        return Verdict(c.id, c.text, c.source, c.form, INCONCLUSIVE, alpha=c.alpha, basis="none",
                       lacking=[data.why(d, system, m) for d, m, _ in data.components(t)
                                if not data.has(d, system, m)], detail="the grid lacks the system's cells")
    rows, absent, untested = _versus_all(data, c, system, t, universe)
    observed = 1 + sum(cmp.effect < 0 for _, cmp, _ in rows)
    tested = [(o, cmp, pc) for o, cmp, pc in rows if cmp.p is not None]
    better = sum(1 for _, cmp, pc in tested if pc < c.alpha and cmp.effect < 0)
    worse = sum(1 for _, cmp, pc in tested if pc < c.alpha and cmp.effect > 0)
    lo, hi = 1 + better, 1 + len(rows) - worse + len(absent)
    exact, top = c.args.get("rank"), c.args.get("top")
    if exact is not None:
        verdict = SUPPORTED if lo == hi == exact else CONTRADICTED if not lo <= exact <= hi else INCONCLUSIVE
        want = f"rank {exact}"
    else:
        verdict = SUPPORTED if hi <= top else CONTRADICTED if lo > top else INCONCLUSIVE
        want = f"top {top}"
    return Verdict(c.id, c.text, c.source, c.form, verdict, float(observed), float(lo), float(hi),
                   n=len(rows) + 1 + len(absent), alpha=c.alpha,
                   lacking=list(dict.fromkeys(untested + [f"{o} on {t.label}" for o in absent])),
                   basis="per-query" if len(tested) == len(rows) else "means",
                   detail=f"{system} ranks {observed} of {len(rows) + 1} by mean on {t.label}; ranks consistent with "
                          f"the tests: {lo}-{hi} (claimed {want})")


def check_equivalent(data: GridData, c: Claim) -> Verdict:
    a, b, delta = c.args["a"], c.args["b"], float(c.args["delta"])
    cmp = compare(data, a, b, c.targets[0], 2 * c.alpha)
    v = Verdict(c.id, c.text, c.source, c.form, INCONCLUSIVE, cmp.effect, alpha=c.alpha, n=cmp.n or None,
                lacking=cmp.lacking, basis="per-query")
    what = f"{a} − {b} on {c.targets[0].label}"
    if cmp.effect is None or cmp.se is None:
        v.basis = "none" if cmp.effect is None else "means"
        v.detail = f"{what}: TOST needs per-query values" + (f"; from the means {cmp.effect:+.4f}"
                                                               if cmp.effect is not None else "")
        return v
    from scipy import stats

    se, eff = cmp.se, cmp.effect
    if se == 0:
        p = 0.0 if abs(eff) < delta else 1.0
        lo_ci = hi_ci = eff
    elif cmp.t_based:
        df = cmp.n - 1
        p = max(float(stats.t.sf((eff + delta) / se, df)), float(stats.t.cdf((eff - delta) / se, df)))
        q = float(stats.t.ppf(1 - c.alpha, df))
        lo_ci, hi_ci = eff - q * se, eff + q * se
    else:
        p = max(float(stats.norm.sf((eff + delta) / se)), float(stats.norm.cdf((eff - delta) / se)))
        q = float(stats.norm.ppf(1 - c.alpha))
        lo_ci, hi_ci = eff - q * se, eff + q * se
    v.p, v.ci_low, v.ci_high = p, lo_ci, hi_ci
    v.verdict = SUPPORTED if p < c.alpha else CONTRADICTED if lo_ci > delta or hi_ci < -delta else INCONCLUSIVE
    v.detail = (f"{what} = {eff:+.4f}, {100 * (1 - 2 * c.alpha):g}% CI [{lo_ci:+.4f}, {hi_ci:+.4f}] against "
                f"±{delta:g} (TOST)")
    return v


def check_latency(data: GridData, c: Claim) -> Verdict:
    from irgrid.report.figures import latencies

    a, b, ratio = c.args["a"], c.args["b"], float(c.args["at_least"])
    frame, source = latencies(data.grid)
    frame = frame.assign(dataset=frame["dataset"].astype(str).map(lambda d: paper.canonical(d)))
    want = [paper.canonical(d) for d in c.targets[0].names] if c.targets else None
    cells = {(d, s): r for d, s, r in zip(frame["dataset"], frame["system"], frame.itertuples())}
    datasets = want if want is not None else sorted({d for d, s in cells if s == a} & {d for d, s in cells if s == b})
    lacking = [f"{d} {s} ms/query" for d in datasets for s in (a, b) if (d, s) not in cells]
    if want is None and not datasets:
        lacking = [f"ms/query of {a} and {b} on a shared dataset"]
    if lacking:
        return Verdict(c.id, c.text, c.source, c.form, INCONCLUSIVE, alpha=c.alpha, lacking=lacking, basis="none",
                       detail=f"latency: the grid lacks cells ({source})")
    ra = [cells[d, a] for d in datasets]
    rb = [cells[d, b] for d in datasets]
    point = sum(r.ms for r in ra) / sum(r.ms for r in rb)
    spread = all(not pd.isna(r.lo) and not pd.isna(r.hi) for r in ra + rb)
    v = Verdict(c.id, c.text, c.source, c.form, INCONCLUSIVE, point, n=len(datasets), alpha=c.alpha)
    if spread:
        lo = sum(r.lo for r in ra) / sum(r.hi for r in rb)
        hi = sum(r.hi for r in ra) / sum(r.lo for r in rb)
        v.ci_low, v.ci_high, v.basis = lo, hi, "spread"
        v.verdict = SUPPORTED if lo >= ratio else CONTRADICTED if hi < ratio else INCONCLUSIVE
    else:
        v.basis = "point"
        v.verdict = SUPPORTED if point >= ratio else CONTRADICTED
    v.detail = (f"ms/query {a} / {b} over {len(datasets)} dataset(s) = {point:.2f} (claimed >= {ratio:g}); "
                + ("range from the rounds' min/max" if spread else "one measurement per cell, no spread") + f". {source}")
    return v


def check_jaccard(data: GridData, c: Claim, universe: Sequence[str], families: Mapping[str, str]) -> Verdict:
    from irgrid.report.failures import failure_ranks, hard_queries, jaccard

    groups = c.args.get("groups")
    label = ({s: g for g, members in groups.items() for s in members} if groups else  # a system of no known
             {s: families[s] for s in (universe or data.systems) if s in families})  # family is in no group
    fraction = float(c.args.get("fraction", 0.1))
    b_perm = int(c.args.get("resamples", 1000))
    lacking: list[str] = []
    sets: dict[str, dict[str, set[str]]] = {}
    for d in c.targets[0].names:
        name = data.dataset(d)
        have = [s for s in label if data.grid.has_run(name, s)]
        lacking += [f"run {name} {s}" for s in label if s not in have]
        if len(have) < 2:
            continue
        qrels = data.grid.qrels(name)
        sets[name] = {s: set(hard_queries(failure_ranks(data.grid.run(name, s), qrels), fraction)) for s in have}
    systems = sorted({s for per in sets.values() for s in per})
    if not sets:
        return Verdict(c.id, c.text, c.source, c.form, INCONCLUSIVE, alpha=c.alpha, lacking=lacking, basis="none",
                       detail="no dataset with stored runs of two systems")
    pairs = [(d, x, y, jaccard(per[x], per[y])) for d, per in sets.items() for i, x in enumerate(sorted(per))
             for y in sorted(per)[i + 1:]]
    idx = {s: i for i, s in enumerate(systems)}
    px = np.array([idx[x] for _, x, _, _ in pairs])
    py = np.array([idx[y] for _, _, y, _ in pairs])
    jv = np.array([j for *_, j in pairs])
    labels = np.array([label[s] for s in systems])

    def stat(lab: np.ndarray) -> float:
        same = lab[px] == lab[py]
        if same.all() or not same.any():
            return math.nan
        return float(jv[same].mean() - jv[~same].mean())

    observed = stat(labels)
    v = Verdict(c.id, c.text, c.source, c.form, INCONCLUSIVE, None if math.isnan(observed) else observed,
                n=len(systems), alpha=c.alpha, lacking=lacking, basis="runs")
    if math.isnan(observed):
        v.detail = "every pair is within one group or none is: within vs across is undefined"
        return v
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    perm = np.array([stat(rng.permutation(labels)) for _ in range(b_perm)])
    perm = perm[~np.isnan(perm)]
    p_greater = float((np.sum(perm >= observed - 1e-12) + 1) / (len(perm) + 1))
    p_less = float((np.sum(perm <= observed + 1e-12) + 1) / (len(perm) + 1))
    v.p = min(1.0, 2 * min(p_greater, p_less))
    v.verdict = _directional(observed, v.p, c.alpha)
    if lacking and v.verdict == SUPPORTED:
        v.detail = "supported on the systems present; "
    v.detail += (f"mean Jaccard within groups − across = {observed:+.3f} over {len(pairs)} pairs of {len(systems)} "
                 f"systems on {len(sets)} dataset(s); label permutations: {len(perm)}")
    return v


# -- the block ----------------------------------------------------------------------------------------------------
def recorded_claims(grid: Grid) -> bool:
    """Whether the experiment file the grid recorded has a `claims:` block (`irgrid diff` reads it when present)."""
    from irgrid.util import yamlsafe

    text = grid.manifest.get("experiment_text")
    if not text:
        return False
    try:
        data = yamlsafe.load_text(text)
    except Exception:  # noqa: BLE001 - claims_of says why when it is asked to read them
        return True
    return isinstance(data, dict) and bool(data.get("claims"))


def claims_of(grid: Grid, source: str | Path | None = None) -> tuple[list[Claim], list[str], str]:
    """(claims, the systems they speak about, where they came from): from an experiment (or claims-only) YAML, or
    else from the experiment file the grid recorded (manifest `experiment_text`)."""
    from irgrid.util import yamlsafe

    if source is not None:
        path = Path(source)
        if not path.is_file():
            raise ClaimsError(f"claims file {path} does not exist; give an experiment YAML with a `claims:` block")
        try:
            data = yamlsafe.load_file(path)
        except yamlsafe.YamlError as e:
            raise ClaimsError(str(e)) from None
        where = str(path)
    else:
        text = grid.manifest.get("experiment_text")
        if not text:
            raise ClaimsError(f"{grid.out}/manifest.json records no experiment file to read claims from; pass "
                              f"--claims EXPERIMENT.yaml (e.g. experiments/paper.yaml)")
        try:
            data = yamlsafe.load_text(text)
        except Exception as e:  # noqa: BLE001 - a recorded file that no longer parses: say so
            raise ClaimsError(f"{grid.out}/manifest.json: its experiment_text does not parse ({e}); pass --claims "
                              f"EXPERIMENT.yaml") from None
        where = f"{grid.out}/manifest.json (experiment {grid.manifest.get('experiment', '?')})"
    if not isinstance(data, dict) or not data.get("claims"):
        raise ClaimsError(f"{where}: no `claims:` block; add one (docs/claims.md) or pass --claims with a file "
                          f"that has one (e.g. experiments/paper.yaml)")
    if "retrievers" in data and "datasets" in data:  # an experiment: its names, fully checked
        from irgrid.runner.experiment import ExperimentError, from_dict

        try:
            spec = from_dict(data, where)
        except ExperimentError as e:
            raise ClaimsError(str(e)) from None
        return list(spec.claims), [r.name for r in spec.retrievers], where
    from irgrid.measures import aggregates  # a claims-only file: checked against the grid's names

    systems = grid.systems()
    datasets = [d for d in grid.datasets if d not in aggregates()]  # results.csv's aggregate rows are no datasets
    try:
        return parse(data["claims"], systems, datasets, list(aggregates()), where), systems, where
    except ClaimError as e:
        raise ClaimsError(str(e)) from None


def evaluate(grid: Grid, claims: Sequence[Claim], universe: Sequence[str] = (),
             bootstrap: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED, zero_shot: bool = False) -> list[Verdict]:
    """Every claim's verdict on this grid; `zero_shot`: on the cells known to be zero-shot only (a group compares
    two systems on the members both are zero-shot on, its weights renormalised)."""
    data = GridData(grid, bootstrap, seed, zero_shot)
    families = grid.families()
    out = []
    with _frozen_heap():
        for c in claims:
            out.append(_check(data, c, universe, families))
    return out


@contextlib.contextmanager
def _frozen_heap():
    """statsmodels' Holm correction calls gc.collect() on every call, which walks the whole heap (0.2-0.3 s each
    in a process holding a grid): objects alive now are moved out of the collector's reach while the claims are
    checked, and handed back after."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _check(data: GridData, c: Claim, universe: Sequence[str], families: Mapping[str, str]) -> Verdict:
    if c.form in ("beats", "beats_on_average"):
        return check_beats(data, c)
    if c.form == "best":
        return check_best(data, c, universe)
    if c.form == "rank":
        return check_rank(data, c, universe)
    if c.form == "equivalent":
        return check_equivalent(data, c)
    if c.form == "latency":
        return check_latency(data, c)
    if c.form == "jaccard":
        return check_jaccard(data, c, universe, families)
    raise AssertionError(c.form)  # irgrid.core.claims.FORMS names exactly these


def _fmt(x: float | None, digits: int = 4) -> str:
    """A number for the table: `digits` decimals without trailing zeros; very large or small ones in g format."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if abs(x) >= 1000 or (x != 0 and abs(x) < 1e-3):
        return f"{x:.{digits}g}"
    return f"{x:.{digits}f}".rstrip("0").rstrip(".")


def to_markdown(verdicts: Sequence[Verdict], where: str = "") -> str:
    from irgrid.util.markdown import markdown_table

    counts = {k: sum(v.verdict == k for v in verdicts) for k in (SUPPORTED, CONTRADICTED, INCONCLUSIVE)}
    head = (f"Claims{' of ' + where if where else ''}: {counts[SUPPORTED]} supported, {counts[CONTRADICTED]} "
            f"contradicted, {counts[INCONCLUSIVE]} inconclusive (of {len(verdicts)})\n\n")
    rows = [[v.id, v.verdict, v.form, _fmt(v.effect),
             "–" if v.ci_low is None else f"[{_fmt(v.ci_low)}, {_fmt(v.ci_high)}]",
             "–" if v.p is None else f"{v.p:.3g}", "–" if v.n is None else str(v.n), f"{v.alpha:g}", v.basis,
             v.source, v.text] for v in verdicts]
    table = markdown_table(["id", "verdict", "form", "effect", "CI", "p", "n", "α", "basis", "source", "claim"],
                           rows, "llllrrrr", escape=True)
    notes = [f"- **{v.id}**: {v.detail}" + (f". Needs: {'; '.join(v.lacking[:12])}"
                                            + (f" (+{len(v.lacking) - 12} more)" if len(v.lacking) > 12 else "")
                                            if v.lacking else "") for v in verdicts]
    return head + table + "\n\n" + "\n".join(notes) + "\n"


def to_json(verdicts: Sequence[Verdict]) -> str:
    return json.dumps([v.row() for v in verdicts], indent=2, default=_json_default)


def _json_default(x: Any) -> Any:
    if isinstance(x, (np.floating, np.integer)):
        return x.item()
    raise TypeError(type(x).__name__)


def run(out: str | Path, claims_file: str | Path | None = None,
        bootstrap: int = BOOTSTRAP_B, seed: int = BOOTSTRAP_SEED, zero_shot: bool = False
        ) -> tuple[list[Verdict], str]:
    """Load the grid, read its claims, evaluate them: (verdicts, where the claims came from)."""
    from irgrid.report.stored import load

    check_bootstrap(bootstrap)
    grid = load(out)
    claims, universe, where = claims_of(grid, claims_file)
    return evaluate(grid, claims, universe, bootstrap, seed, zero_shot), where


def zero_shot_report(out: str | Path, verdicts: Sequence[Verdict], zero: Sequence[Verdict], where: str,
                     fmt: str = "markdown") -> str:
    """The claims on all cells and on zero-shot cells only, and the group aggregates both ways."""
    from irgrid.report import zeroshot
    from irgrid.report.stored import load

    grid = load(out)
    aggs, flags = zeroshot.aggregates(grid), zeroshot.flags(grid)
    if fmt == "json":
        return json.dumps({"all": [v.row() for v in verdicts], "zero_shot": [v.row() for v in zero],
                           "aggregates": aggs.to_dict("records"), "flags": flags.to_dict("records")},
                          indent=2, default=_json_default)
    from irgrid.util.markdown import markdown_table

    counts = flags["flag"].value_counts().to_dict()
    changed = [f"{a.id}: {a.verdict} -> {z.verdict}" for a, z in zip(verdicts, zero) if a.verdict != z.verdict]
    agg_rows = [[r.aggregate, r.system, f"{r.all:.4f}", "–" if r.zero_shot is None or pd.isna(r.zero_shot)
                 else f"{r.zero_shot:.4f}", f"{r.zero_shot_members}/{r.members}"] for r in aggs.itertuples()]
    return ("# All cells\n\n" + to_markdown(verdicts, where) + "\n# Zero-shot cells only\n\n"
            + f"Cells: {counts.get('zero-shot', 0)} zero-shot, {counts.get('in-domain', 0)} in-domain, "
              f"{counts.get('unknown', 0)} unknown (irgrid.core.training; unknown cells do not count as zero-shot)."
              "\n\n" + to_markdown(zero, where)
            + "\nVerdicts that differ: " + ("; ".join(changed) if changed else "none") + "\n\n"
            + "# Group aggregates: all cells vs zero-shot members\n\n"
            + markdown_table(["aggregate", "system", "all", "zero-shot", "members"], agg_rows, "llrrr") + "\n")


def check_bootstrap(bootstrap: int) -> None:
    if bootstrap < 100:
        raise ClaimsError(f"--bootstrap {bootstrap}: give at least 100 resamples (default 1000)")


def summary(verdicts: Iterable[Verdict]) -> dict[str, int]:
    out = {SUPPORTED: 0, CONTRADICTED: 0, INCONCLUSIVE: 0}
    for v in verdicts:
        out[v.verdict] += 1
    return out
