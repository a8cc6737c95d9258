"""experiments/paper.yaml end to end in tiny-model mode on what is staged (`make test-all`)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from irgrid import paper

ROOT = Path(__file__).resolve().parents[2]
PAPER_YAML = ROOT / "experiments" / "paper.yaml"


# one retriever per family of the paper's grid, the cheapest of each on CPU (SPLADE's 30,522-wide head and
# doc2query's sampling over all 5,183 SciFact abstracts take minutes even with tiny weights)
ONE_PER_FAMILY = {"sparse/lexical": "bm25", "sparse/learned": "unicoil", "dense": "contriever",
                  "late-interaction": "colbertv2", "expansion": "query2doc"}


@pytest.mark.slow
@pytest.mark.heavy  # five tiny models through the whole paper grid path: `make test-all`
def test_paper_grid_runs_tiny_on_what_is_staged(tmp_path):
    """`irgrid run experiments/paper.yaml --tiny-models`, restricted to the staged datasets (a query subset) and one
    entry per family, finishes: every cell in results.csv, every aggregate either in results.csv or in
    failures.json with the datasets it lacks (none is computable from SciFact alone), and a report."""
    from irgrid import cli
    from irgrid.core.retrievers import get
    from irgrid.data import datasets

    spec = yaml.safe_load(PAPER_YAML.read_text())
    staged = [d for d in spec["datasets"] if datasets.get(d).docs_available()[0]]
    assert staged == ["beir/scifact/test"]  # what /work/shared/datasets stages of the paper's 34 datasets
    assert set(ONE_PER_FAMILY.values()) <= set(spec["retrievers"])
    families = {f"{get(r).family}/{get(r).architecture}" if get(r).family == "sparse" else get(r).family
                for r in ONE_PER_FAMILY.values()}
    assert families == set(ONE_PER_FAMILY)
    tiny = dict(spec, name="paper-tiny", datasets=[{"name": d, "queries": 8, "seed": 0} for d in staged],
                retrievers=list(ONE_PER_FAMILY.values()))
    path = tmp_path / "paper-tiny.yaml"
    path.write_text(yaml.safe_dump(tiny, sort_keys=False))
    out = tmp_path / "out"
    # exit status 1: failures were recorded (here the aggregates that need datasets not staged), the grid went on
    assert cli.main(["run", str(path), "--tiny-models", "--out", str(out)]) == 1

    results = pd.read_csv(out / "results.csv")
    cells = results[results.dataset == "beir/scifact/test@q8s0"]
    assert set(cells.system) == set(ONE_PER_FAMILY.values())
    assert set(cells.measure) == {"nDCG@10", "ms/query"}
    failures = {f["dataset"]: f["error"] for f in json.loads((out / "failures.json").read_text())}
    for name in paper.PAPER_AGGREGATES:
        if name in set(results.dataset):
            continue  # computable: in results.csv
        assert "needs results on" in failures[f"aggregate:{name}"], name
    assert not [k for k in failures if not k.startswith("aggregate:")]  # every cell ran
    assert cli.main(["report", str(out)]) == 0
    report = out / "report"
    assert (report / "main-beir.md").exists() and (report / "failure_ranks.csv").exists()
    # a query sample fills no column of the paper's tables: they are left out unless asked for (--paper)
    assert not (report / "table2.md").exists()
    assert cli.main(["report", str(out), "--paper"]) == 0
    assert "BM25" in (report / "table2.md").read_text()  # the published rows at least

