"""A bring-your-own collection through `irgrid run` in a subprocess, with BM25 and a dense retriever."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from support import write_scifact_slice

N_QUERIES, N_DOCS = 40, 300


@pytest.fixture(scope="module")
def collection(tmp_path_factory) -> Path:
    """A slice of the staged BEIR SciFact: 40 test queries, their relevant abstracts plus others (300 docs)."""
    root = tmp_path_factory.mktemp("byo")
    write_scifact_slice(root, N_QUERIES, N_DOCS, all_formats=True)
    return root


@pytest.mark.slow
@pytest.mark.heavy  # ~60 s; tests/integration/test_byo.py covers the same path through the API in make test
def test_byo_runs_through_cli_with_bm25_and_a_dense_retriever(collection):
    exp = collection / "exp.yaml"
    exp.write_text("""\
name: byo
collections:
  - name: scifact-slice
    docs: data/docs.tsv
    topics: data/topics.tsv
    qrels: data/qrels.txt
    measures: [nDCG@10]
datasets: [scifact-slice]
retrievers: [bm25-pisa, all-minilm-l6-v2, bm25]
measures: [nDCG@10, R@100]
baseline: bm25-pisa
""")
    out, cache = collection / "out", collection / "cache"
    proc = subprocess.run([sys.executable, "-m", "irgrid.cli", "run", str(exp), "--out", str(out), "--cache",
                           str(cache)], capture_output=True, text=True, timeout=900, cwd="/")  # paths: YAML-relative
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = pd.read_csv(out / "results.csv")
    value = results.set_index(["system", "measure"])["value"]
    for system in ("bm25-pisa", "all-minilm-l6-v2", "bm25"):
        # 300 documents: every system finds most relevant abstracts (full SciFact: 0.68 / 0.65 / 0.68)
        assert 0.55 < value[system, "nDCG@10"] <= 1, (system, value[system, "nDCG@10"])
        assert value[system, "R@100"] > 0.9
    perq = pd.read_csv(out / "perquery.csv")
    assert len(perq[(perq.system == "bm25") & (perq.measure == "nDCG@10")]) == N_QUERIES
    assert (out / "runs" / "scifact-slice" / "all-minilm-l6-v2.res.gz").exists()

