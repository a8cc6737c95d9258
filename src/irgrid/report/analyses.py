"""Every analysis of a stored grid in one pass: bootstrap SEs, z-scores, failure ranks, hard-query overlap,
fusion suggestions and their RRF scores, win/tie/loss and the meta-analysis."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from irgrid.core.significance import DEFAULT_RESAMPLES, DEFAULT_SEED, PairedTest, describe_correction
from irgrid.report import failures
from irgrid.report import stats as stats_mod
from irgrid.report import zscores as zscores_mod
from irgrid.report.stored import Grid


@dataclass
class Analyses:
    bootstrap: pd.DataFrame
    zscores: pd.DataFrame
    failure_ranks: pd.DataFrame
    hard_queries: pd.DataFrame
    jaccard: pd.DataFrame  # long: dataset, a, b, jaccard
    fusion_suggestions: pd.DataFrame
    fusion_rrf: pd.DataFrame
    win_tie_loss: pd.DataFrame
    meta_analysis: pd.DataFrame
    comparisons: pd.DataFrame  # effect sizes and the experiment's test per pair (stats.comparisons)
    params: dict[str, Any] = field(default_factory=dict)

    def frames(self) -> dict[str, pd.DataFrame]:
        return {k: v for k, v in self.__dict__.items() if isinstance(v, pd.DataFrame)}


def analyse(grid: Grid, n_resamples: int = stats_mod.BOOTSTRAP_B, seed: int = stats_mod.BOOTSTRAP_SEED, fraction: float = 0.1,
            depth: int = 1000, reference: str | Path | None = None, rrf_k: int = 60) -> Analyses:
    import ir_measures

    boot = stats_mod.bootstrap_table(grid.perquery, n_resamples, seed)
    z = zscores_mod.zscores(grid.results, boot, grid.paper_names(), reference)
    ranks, hard, jac, skipped = [], [], [], []
    for dataset in grid.datasets:
        systems = [s for s in grid.systems(dataset) if grid.has_run(dataset, s)]
        if not systems:
            skipped.append(dataset)
            continue
        qrels = grid.qrels(dataset)
        sets = {}
        for system in systems:
            r = failures.failure_ranks(grid.run(dataset, system), qrels, depth=depth)
            ranks.append(pd.DataFrame({"dataset": dataset, "system": system, "qid": r.index, "rank": r.to_numpy()}))
            sets[system] = failures.hard_queries(r, fraction)
            hard += [{"dataset": dataset, "system": system, "qid": q, "rank": int(r[q])} for q in sets[system]]
        matrix = failures.jaccard_matrix(sets)
        jac += [{"dataset": dataset, "a": a, "b": b, "jaccard": float(matrix.at[a, b])} for a, b in stats_mod.pairs(list(sets))]
    jac_df = pd.DataFrame(jac, columns=["dataset", "a", "b", "jaccard"])
    first = first_measure_values(grid)
    sugg = failures.fusion_suggestions(jac_df, grid.families(), first, components=grid.component_families(),
                                       fused=grid.fused_pairs())
    sugg["expression"] = [failures.fusion_expression(x, y, rrf_k) for x, y in zip(sugg["a"], sugg["b"])]  # paste-ready
    fused = []
    for _, s in sugg.iterrows():
        dataset = s["dataset"]
        qrels = grid.qrels(dataset)
        measures = [ir_measures.parse_measure(m) for m in grid.measures(dataset)]
        runs = {n: grid.run(dataset, n) for n in (s["a"], s["b"])}
        runs["rrf"] = failures.rrf_runs(runs[s["a"]], runs[s["b"]], k=rrf_k)
        values = {n: failures.evaluate(measures, qrels, r) for n, r in runs.items()}
        for m in map(str, measures):
            fused.append({"dataset": dataset, "a": s["a"], "b": s["b"], "measure": m,
                          "a_value": values[s["a"]][m], "b_value": values[s["b"]][m], "rrf_value": values["rrf"][m],
                          "gain_over_best": values["rrf"][m] - max(values[s["a"]][m], values[s["b"]][m]), "k": rrf_k})
    base = grid.baseline
    st = statistics(grid)
    comp = stats_mod.comparisons(grid.perquery, grid.results, st["test"] or PairedTest("t"), st["correction"], base,
                                 st["comparisons"], n_resamples, seed, st["alpha"])
    return Analyses(
        bootstrap=boot, zscores=z,
        failure_ranks=pd.concat(ranks, ignore_index=True) if ranks else pd.DataFrame(columns=["dataset", "system", "qid", "rank"]),
        hard_queries=pd.DataFrame(hard, columns=["dataset", "system", "qid", "rank"]),
        jaccard=jac_df, fusion_suggestions=sugg,
        fusion_rrf=pd.DataFrame(fused, columns=["dataset", "a", "b", "measure", "a_value", "b_value", "rrf_value",
                                                "gain_over_best", "k"]),
        win_tie_loss=stats_mod.win_tie_loss(grid.results),
        meta_analysis=stats_mod.meta_analysis(grid.perquery, base) if base else stats_mod.meta_analysis(grid.perquery.iloc[:0], ""),
        comparisons=comp,
        params={"B": n_resamples, "seed": seed, "fraction": fraction, "depth": depth, "rrf_k": rrf_k,
                "skipped": skipped, "statistics": st},
    )


def statistics(grid: Grid) -> dict[str, Any]:
    """The grid's test, correction, alpha, baseline and comparisons, from manifest.json (`statistics`, written since
    irgrid records them); a folder from before says so instead of guessing."""
    recorded = grid.manifest.get("statistics")
    if not recorded:
        return {"test": None, "correction": None, "alpha": 0.05, "baseline": grid.baseline, "comparisons": "baseline",
                "describe": "the grid's paired test (not recorded: manifest.json predates irgrid's statistics record)",
                "describe_correction": "its correction, if any"}
    t = recorded["test"]
    test = PairedTest(t["name"], t.get("resamples", DEFAULT_RESAMPLES), t.get("seed", DEFAULT_SEED))
    correction = None if recorded.get("correction") in (None, "none") else recorded["correction"]
    return {"test": test, "correction": correction, "alpha": float(recorded.get("alpha", 0.05)),
            "baseline": recorded.get("baseline", grid.baseline), "comparisons": recorded.get("comparisons", "baseline"),
            "describe": test.describe(), "describe_correction": describe_correction(correction)}


def first_measure_values(grid: Grid) -> pd.DataFrame:
    """Each dataset's first measure (its headline metric, as in Table 2) per system."""
    rows = []
    for dataset in grid.datasets:
        m = grid.measures(dataset)[0]
        block = grid.results[(grid.results["dataset"] == dataset) & (grid.results["measure"] == m)]
        rows += [{"dataset": dataset, "system": r["system"], "measure": m, "value": float(r["value"])}
                 for _, r in block.iterrows()]
    return pd.DataFrame(rows, columns=["dataset", "system", "measure", "value"])
