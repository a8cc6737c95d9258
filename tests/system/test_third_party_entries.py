"""A third-party entry package as a user installs one (a distribution declaring its module in the `irgrid.entries`
entry points, irgrid.core.entries): listed by `irgrid list` and run by an experiment file like irgrid's own."""

from __future__ import annotations

import subprocess
import sys

import pandas as pd
from support import BM25_PISA_K12, install_entry_package


def test_a_third_party_entry_runs_in_a_grid(tmp_path):
    env = install_entry_package(tmp_path / "site", "irgrid-bm25-variants", "irgrid_bm25_variants", BM25_PISA_K12)
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: third-party\n"
                   "datasets: [vaswani]\n"
                   "retrievers:\n"
                   "  - bm25-pisa\n"
                   "  - bm25-pisa-k1.2                                                  # the package's entry\n"
                   "  - {name: bm25-pisa, as: bm25-pisa-options, options: {k1: 1.2}}   # the same by options\n"
                   "measures: [AP, nDCG@10]\n")
    out, cache = tmp_path / "out", tmp_path / "cache"
    proc = subprocess.run([sys.executable, "-m", "irgrid.cli", "run", str(exp), "--out", str(out), "--cache",
                           str(cache)], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = pd.read_csv(out / "results.csv")
    ap = results[results.measure == "AP"].set_index("system")["value"]
    assert set(ap.index) == {"bm25-pisa", "bm25-pisa-k1.2", "bm25-pisa-options"}
    assert ap["bm25-pisa-k1.2"] == ap["bm25-pisa-options"]  # one configuration, one key: the same run
    assert ap["bm25-pisa-k1.2"] != ap["bm25-pisa"] and 0.25 < ap["bm25-pisa-k1.2"] < 0.35  # k1 changed the run
    perq = pd.read_csv(out / "perquery.csv")
    assert perq[(perq.system == "bm25-pisa-k1.2") & (perq.measure == "AP")].qid.nunique() == 93
