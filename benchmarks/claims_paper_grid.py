"""`irgrid claims` on a synthetic stored grid of the paper's size: its 33 retrievers x 34 datasets = 1,122 cells,
each dataset with its catalog measures and a realistic number of queries (MS MARCO dev 6,980, HotpotQA 7,405,
Quora 10,000, ...), per-query values drawn around the published means; results.csv with t-test p-values against
BM25 (Holm), ms/query rows; then the 28 claims of experiments/paper.yaml checked, timed (the issue's target: <= 60 s
on 2 cores). Not a test: it prints the time of each stage.

    python benchmarks/claims_paper_grid.py [--out /tmp/claims-bench] [--scale 1.0] [--keep]

`--scale 0.1` draws a tenth of the queries (a quick look); the grid folder is deleted unless --keep.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd

from irgrid import measures, paper
from irgrid.core import retrievers as r_mod
from irgrid.core.significance import correct
from irgrid.report import claims as claims_mod

ROOT = Path(__file__).resolve().parents[1]
PAPER_YAML = ROOT / "experiments" / "paper.yaml"
# queries per dataset (test splits as the paper evaluates them; CQADupStack per forum)
QUERIES = {paper.MSMARCO_DEV: 6980, paper.DL19: 43, paper.DL20: 54, "beir/trec-covid/test": 50,
           "beir/nfcorpus/test": 323, "beir/nq/test": 3452, "beir/hotpotqa/test": 7405, "beir/fiqa/test": 648,
           "beir/arguana/test": 1406, "beir/webis-touche2020/v2": 49, "beir/quora/test": 10000,
           "beir/dbpedia-entity/test": 400, "beir/scidocs/test": 1000, "beir/fever/test": 6666,
           "beir/climate-fever/test": 1535, "beir/scifact/test": 300, paper.LOTTE["search"]: 3869,
           paper.LOTTE["forum"]: 4493, paper.INSTRUCTIR: 2355, paper.FOLLOWIR["robust04"]: 52,
           paper.FOLLOWIR["news21"]: 32, paper.FOLLOWIR["core17"]: 40}
QUERIES.update({d: 1100 for d in paper.CQADUPSTACK})


def published_means() -> dict[tuple[str, str, str], float]:
    """(paper model, dataset, measure) -> the published value on irgrid's scale (Tables A.4-A.7)."""
    tables = {t: pd.read_csv(paper.reference_dir() / paper.TABLE_FILES[t]).set_index("model")
              for t in ("A.4", "A.5", "A.6", "A.7")}
    out = {}
    for col in paper.TABLE_A4 + paper.TABLE_A5 + paper.TABLE_A6 + paper.TABLE_A7:
        for model, value in tables[col.table][col.column].items():
            for part in col.parts:
                for d in part.members:
                    out[(model, d, part.measure)] = float(value) / col.scale
    return out


def write_grid(out: Path, scale: float, seed: int = 0) -> tuple[int, int]:
    import yaml

    names = {r_mod.get(n).paper_name: n for n in yaml.safe_load(PAPER_YAML.read_text())["retrievers"]}
    rng = np.random.default_rng(seed)
    means = published_means()
    per_dataset = paper.dataset_measures()
    pq_parts, res = [], []
    cells = 0
    for d in paper.datasets():
        n = max(5, int(QUERIES[d] * scale))
        qids = np.array([f"q{i}" for i in range(n)])
        for m in per_dataset.get(d, ("nDCG@10",)):
            lo = -1.0 if m.startswith("p-MRR") else 0.0
            difficulty = rng.normal(0, 0.2, n)  # shared by all systems: the queries' own difficulty
            block = {}
            for model, system in names.items():
                mu = means.get((model, d, m), means.get((model, d, "nDCG@10"), 0.4))
                block[system] = np.clip(mu + difficulty + rng.normal(0, 0.15, n), lo, 1.0)
                block[system] += mu - block[system].mean()  # the published mean exactly
            from scipy.stats import ttest_rel

            ps = {s: float(ttest_rel(v, block["bm25"]).pvalue) for s, v in block.items() if s != "bm25"}
            pc = dict(zip(ps, correct(list(ps.values()), "holm")))
            for s, v in block.items():
                pq_parts.append(pd.DataFrame({"dataset": d, "system": s, "measure": m, "qid": qids, "value": v}))
                res.append({"dataset": d, "system": s, "measure": m, "value": float(v.mean()),
                            "p_value": ps.get(s), "p_value_corrected": pc.get(s),
                            "significant": None if s == "bm25" else bool(pc[s] < 0.05), "baseline": "bm25"})
        for system in names.values():
            res.append({"dataset": d, "system": system, "measure": "ms/query",
                        "value": float(rng.lognormal(3.5, 1.0)), "baseline": "bm25"})
            cells += 1
    results = pd.DataFrame(res)
    results = pd.concat([results, measures.aggregate(results, paper.PAPER_AGGREGATES).assign(baseline="bm25")],
                        ignore_index=True)
    out.mkdir(parents=True, exist_ok=True)
    results.to_csv(out / "results.csv", index=False)
    perquery = pd.concat(pq_parts, ignore_index=True)
    perquery.to_csv(out / "perquery.csv", index=False)
    families = {n: r_mod.get(n).family for n in names.values()}
    manifest = {"experiment": "paper-synthetic", "experiment_text": PAPER_YAML.read_text(),
                "statistics": {"test": {"name": "t"}, "correction": "holm", "alpha": 0.05, "baseline": "bm25"},
                "retrievers": {n: {"family": f} for n, f in families.items()}}
    (out / "manifest.json").write_text(json.dumps(manifest))
    return cells, len(perquery)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="/tmp/claims-bench")
    parser.add_argument("--scale", type=float, default=1.0, help="fraction of each dataset's queries")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    out = Path(args.out)
    t0 = time.perf_counter()
    cells, rows = write_grid(out, args.scale)
    t1 = time.perf_counter()
    print(f"wrote {out}: {cells} cells, {rows:,} per-query rows in {t1 - t0:.1f} s", flush=True)
    verdicts, where = claims_mod.run(out)
    t2 = time.perf_counter()
    counts = claims_mod.summary(verdicts)
    print(f"irgrid claims: {len(verdicts)} claims ({where}) in {t2 - t1:.1f} s: {counts}")
    for v in verdicts:
        print(f"  {v.id:<36} {v.verdict:<13} {v.basis}")
    if not args.keep:
        shutil.rmtree(out)
    sys.exit(0)


if __name__ == "__main__":
    main()
