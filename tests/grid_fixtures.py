"""Stored grids written from per-query values, as `irgrid run` lays them out (results.csv with the paired test
against the baseline and its correction, perquery.csv, manifest.json with `statistics`, families and the experiment
text, optionally runs/ + qrels/ and latency.csv), for the claims and diff tests and the claims benchmark."""

from __future__ import annotations

import gzip
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from irgrid.core.significance import PairedTest, correct
from irgrid.util.files import slug


def write_grid(out: Path, perquery: Mapping[tuple[str, str, str], Sequence[float]], baseline: str,
               families: Mapping[str, str] | None = None, experiment_text: str | None = None,
               test: str = "t", correction: str = "holm", extra_results: pd.DataFrame | None = None,
               runs: Mapping[tuple[str, str], Mapping[str, Sequence[str]]] | None = None,
               qrels: Mapping[str, Mapping[str, Sequence[str]]] | None = None,
               latency: pd.DataFrame | None = None) -> Path:
    """A stored grid folder. `perquery[(dataset, system, measure)]` holds the values of queries q0, q1, ...;
    `runs[(dataset, system)]` maps a qid to its ranked docnos, `qrels[dataset]` a qid to its relevant docnos."""
    out.mkdir(parents=True, exist_ok=True)
    rows = [{"dataset": d, "system": s, "measure": m, "qid": f"q{i}", "value": float(v)}
            for (d, s, m), values in perquery.items() for i, v in enumerate(values)]
    pq = pd.DataFrame(rows, columns=["dataset", "system", "measure", "qid", "value"])
    pq.to_csv(out / "perquery.csv", index=False)
    paired = PairedTest(test)
    res = []
    for (d, m), block in pq.groupby(["dataset", "measure"], sort=False):
        wide = block.pivot_table(index="qid", columns="system", values="value", sort=True)
        systems = list(dict.fromkeys(block["system"]))
        ps = {s: (paired(wide[s].to_numpy(), wide[baseline].to_numpy())[1] if s != baseline and baseline in wide
                  else None) for s in systems}
        tested = [s for s in systems if ps[s] is not None]
        corrected = dict(zip(tested, correct([ps[s] for s in tested], correction)))
        for s in systems:
            pc = corrected.get(s)
            res.append({"dataset": d, "system": s, "measure": m, "value": float(wide[s].mean()),
                        "p_value": ps[s], "p_value_corrected": pc,
                        "significant": None if pc is None else bool(pc < 0.05), "baseline": baseline})
    results = pd.DataFrame(res)
    if extra_results is not None:
        results = pd.concat([results, extra_results.assign(baseline=baseline)], ignore_index=True)
    results.to_csv(out / "results.csv", index=False)
    systems = list(dict.fromkeys(pq["system"]))
    manifest = {"experiment": "fixture", "experiment_text": experiment_text,
                "statistics": {"test": {"name": test}, "correction": correction, "alpha": 0.05,
                               "baseline": baseline},
                "retrievers": {s: {"family": (families or {}).get(s, "dense")} for s in systems}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    for (d, s), ranked in (runs or {}).items():
        folder = out / "runs" / slug(d)
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f"{q} Q0 {doc} {r + 1} {100.0 - r} {s}\n" for q, docs in ranked.items() for r, doc in enumerate(docs)]
        with gzip.open(folder / f"{s}.res.gz", "wt") as f:
            f.writelines(lines)
    for d, rel in (qrels or {}).items():
        (out / "qrels").mkdir(exist_ok=True)
        (out / "qrels" / f"{slug(d)}.qrels").write_text("".join(f"{q} 0 {doc} 1\n" for q, docs in rel.items()
                                                                for doc in docs))
    if latency is not None:
        from irgrid.util.hashing import file_sha256

        latency.assign(results_sha256=file_sha256(out / "results.csv"), measured_at="fixture",
                       rounds=5).to_csv(out / "latency.csv", index=False)
    return out


def noisy(mean: float, n: int, seed: int, sd: float = 0.1) -> np.ndarray:
    """n per-query values around `mean` (clipped to [0, 1])."""
    return np.clip(np.random.default_rng(seed).normal(mean, sd, n), 0, 1)


def shifted(base: np.ndarray, shift: float, seed: int, sd: float = 0.02) -> np.ndarray:
    """Paired values: `base` + shift + small noise (a system that tracks another query by query)."""
    return np.clip(base + shift + np.random.default_rng(seed).normal(0, sd, len(base)), 0, 1)
