"""What a grid's table can and cannot show, per dataset: the tie audit of every run (irgrid.core.ties), the power
and minimum detectable effect of every comparison with the baseline (irgrid.core.power), and the rank intervals
and tie groups of every (dataset, measure) (irgrid.core.ranks). The grid adds these as columns of results.csv
(`COLUMNS`) and the per-dataset MDEs to manifest.json; `pilot_mdes` estimates MDEs for `--dry-run` from runs
already in the cache."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from irgrid.core import power as power_mod
from irgrid.core import ranks as ranks_mod
from irgrid.core import ties as ties_mod
from irgrid.core.significance import BOOTSTRAP_B, BOOTSTRAP_SEED, bootstrap_mean

ALPHA = 0.05
TIE_COLUMNS = ["tie_queries", "tie_min", "tie_max", "tie_expected", "tie_range", "tie_flag"]
POWER_COLUMNS = ["sd_diff", "mde", "mde_corrected", "power", "underpowered"]
RANK_COLUMNS = ["rank", "rank_low", "rank_high", "tie_group"]
COLUMNS = TIE_COLUMNS + POWER_COLUMNS + RANK_COLUMNS


def describe(correction: str | None) -> dict[str, Any]:
    """The manifest's words for these columns."""
    return {
        "tie_policy": ties_mod.TIE_POLICY,
        "tie_audit": (f"per run and measure: tie_queries = share of queries whose scores tie across the cut-off "
                      f"(no cut-off: a tie among documents of different labels); tie_min / tie_max = the mean over tie orders' extremes; tie_expected = "
                      f"the tie-aware expectation (McSherry & Najork 2008, exact); tie_flag: tie_range > "
                      f"{ties_mod.TIE_FLAG_SE} x the bootstrap SE of the mean (B = {BOOTSTRAP_B}, seed "
                      f"{BOOTSTRAP_SEED}); measures of kinds other than {', '.join(ties_mod.KINDS)} are not audited"),
        "power": (f"{power_mod.POWER_TEST} at alpha {ALPHA} and {power_mod.TARGET_POWER:.0%} power from the sd of "
                  f"the per-query differences to the baseline: mde; mde_corrected at the first-step level of the "
                  f"correction ({correction or 'none'}) over the systems compared with the baseline; power: at the "
                  f"observed difference and the corrected level; underpowered: power < {power_mod.TARGET_POWER}"),
        "rank_resolution": (f"{ranks_mod.RESOLUTION}; B = {ranks_mod.RANK_B}, seed {ranks_mod.RANK_SEED}, "
                            f"correction {correction or 'none'}, alpha {ALPHA}; tie_group: compact letters, systems "
                            f"sharing a letter are not resolved"),
    }


def _values(perq: pd.DataFrame, measure: str) -> pd.DataFrame:
    block = perq[perq["measure"] == measure]
    return block.pivot_table(index="qid", columns="system", values="value", sort=True)


def dataset_columns(dataset: str, names: Sequence[str], frames: Sequence[pd.DataFrame], perq: pd.DataFrame,
                    qrels: pd.DataFrame, measures: Sequence[Any], baseline: str | None,
                    correction: str | None) -> tuple[pd.DataFrame, dict[str, Any]]:
    """The columns `COLUMNS` per (system, measure) of one dataset, and its MDE summary per measure. `frames`:
    each system's run as evaluated (original scores; ties matter), `perq`: per-query values (system, qid, measure,
    value)."""
    qrels = qrels[["qid", "docno", "label"]]
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    measure_names = [str(m) for m in measures]
    for name, frame in zip(names, frames):
        qids = perq.loc[perq["system"] == name, "qid"].astype(str).unique()
        summary = ties_mod.summarise(ties_mod.audit_run(frame, qrels, measures, qids)).set_index("measure")
        for m in measure_names:
            row = rows.setdefault((name, m), {})
            if m in summary.index:
                row.update(summary.loc[m].to_dict())
                values = perq.loc[(perq["system"] == name) & (perq["measure"] == m), "value"].dropna().to_numpy(float)
                res = bootstrap_mean(values, BOOTSTRAP_B, ranks_mod.stream_seed(BOOTSTRAP_SEED, dataset, m))
                se = float(res.standard_error) if res is not None else 0.0
                row["tie_flag"] = ties_mod.flagged(row["tie_range"], se)
    summary_out: dict[str, Any] = {}
    family = len(names) - 1
    for m in measure_names:
        wide = _values(perq, m)
        systems = [s for s in names if s in wide.columns]
        if baseline in systems:
            sds = []
            for s in systems:
                if s == baseline:
                    continue
                d = (wide[s] - wide[baseline]).dropna().to_numpy()
                if len(d) < 2:
                    continue
                sd = float(d.std(ddof=1))
                alpha_family = power_mod.family_alpha(ALPHA, family, correction)
                p = power_mod.power(float(d.mean()), sd, len(d), alpha_family)
                rows[(s, m)].update(sd_diff=sd, mde=power_mod.mde(sd, len(d), ALPHA),
                                    mde_corrected=power_mod.mde(sd, len(d), alpha_family), power=p,
                                    underpowered=bool(p < power_mod.TARGET_POWER))
                sds.append((sd, len(d)))
            if sds:
                sd, n = float(np.median([s for s, _ in sds])), int(min(n for _, n in sds))
                summary_out[m] = mde_summary(sd, n, family, correction)
        complete = wide[systems].dropna()
        if len(systems) >= 1 and len(complete):
            res = ranks_mod.resolve(complete.to_numpy(), systems, ranks_mod.RANK_B,
                                    ranks_mod.stream_seed(ranks_mod.RANK_SEED, dataset, m), ALPHA, correction)
            for r in res.systems.itertuples():
                rows[(r.system, m)].update(rank=int(r.rank), rank_low=int(r.rank_low), rank_high=int(r.rank_high),
                                           tie_group=r.tie_group)
    frame = pd.DataFrame([{"system": s, "measure": m, **v} for (s, m), v in rows.items()],
                         columns=["system", "measure", *COLUMNS])
    return frame, summary_out


def mde_summary(sd: float, n: int, family: int, correction: str | None) -> dict[str, Any]:
    """One (dataset, measure)'s MDE: from the median sd of its paired differences to the baseline over n queries,
    before and after the correction over `family` comparisons."""
    return {"queries": n, "sd_diff": sd, "mde": power_mod.mde(sd, n, ALPHA), "family": family,
            "mde_corrected": power_mod.mde(sd, n, power_mod.family_alpha(ALPHA, family, correction))}


def mde_line(measure: str, s: dict[str, Any], correction: str | None) -> str:
    after = ("" if correction in (None, "none") or s["family"] <= 1 else
             f", {s['mde_corrected']:.4f} after {correction} over {s['family']}")
    return f"{measure}: MDE {s['mde']:.4f}{after} (n = {s['queries']}, sd of differences {s['sd_diff']:.4f})"


def pilot_mdes(spec: Any, store: Any) -> list[str]:
    """`--dry-run`: per dataset, the MDEs the grid will have, estimated from runs of its systems already in the
    cache (a pilot: at least the baseline and one other system, or two systems without a baseline), at the
    dataset's full query count. Lines of text; a dataset without a pilot says so."""
    from irgrid import measures as measures_mod
    from irgrid.runner.cell import load_cell

    lines = []
    for dataset in spec.datasets:
        cached = []
        for r in spec.retrievers:
            try:
                if store.runs.has(r.for_dataset(dataset), dataset):
                    cached.append(r)
            except Exception:  # the data itself is not readable here: no pilot for this dataset
                cached = []
                break
        base = next((r for r in cached if r.name == spec.baseline), None)
        pilot = ([base] + [r for r in cached if r is not base])[:4] if base else cached[:4]
        if len(pilot) < 2:
            lines.append(f"{dataset.name}: no cached pilot (needs two cached systems of this grid"
                         f"{', one of them the baseline ' + spec.baseline if spec.baseline else ''})")
            continue
        topics, qrels = dataset.topics(), dataset.qrels()
        cells = [load_cell(r, dataset, store, topics) for r in pilot]
        ms = spec.measures_for(dataset)
        perq = measures_mod.experiment([ties_mod.for_evaluation(c.res) for c in cells], topics, qrels, ms,
                                       names=[c.retriever.name for c in cells], perquery=True, verbose=False)
        perq = perq.rename(columns={"name": "system"})
        family = len(spec.retrievers) - 1
        queries = len(set(qrels["qid"].astype(str)) & set(topics["qid"].astype(str)))
        for m in ms:
            wide = _values(perq, str(m))
            ref = pilot[0].name
            sds = [float((wide[c.retriever.name] - wide[ref]).dropna().std(ddof=1)) for c in cells[1:]
                   if c.retriever.name in wide.columns and ref in wide.columns]
            sds = [s for s in sds if not math.isnan(s)]
            if not sds:
                continue
            s = mde_summary(float(np.median(sds)), queries, family, spec.correction)
            lines.append(f"{dataset.name} [{dataset.group}] {mde_line(str(m), s, spec.correction)}; pilot: "
                         f"{', '.join(c.retriever.name for c in cells)} vs {ref}")
    return lines
