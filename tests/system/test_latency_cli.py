"""`irgrid run --latency` through the command line, then `irgrid report`: Figure 1 from the latency pass."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest


@pytest.mark.slow  # ~30 s: a grid, its latency pass and a report in subprocesses
def test_latency_pass_through_the_cli(tmp_path):
    exp = tmp_path / "exp.yaml"
    exp.write_text(json.dumps({
        "name": "latency-cli", "datasets": [{"name": "vaswani", "queries": 10, "seed": 0}],
        "retrievers": ["bm25-pisa", {"name": "bm25-pisa", "as": "k12", "options": {"k1": 1.2}}],
        "measures": ["AP"], "baseline": "bm25-pisa", "latency_sample": 1}))
    out, cache = tmp_path / "out", tmp_path / "cache"
    cli = [sys.executable, "-m", "irgrid.cli"]
    proc = subprocess.run([*cli, "run", str(exp), "--out", str(out), "--cache", str(cache), "--latency",
                           "--latency-rounds", "2", "--latency-queries", "5"], capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "latency pass (ms/query, median [min-max] over rounds" in proc.stdout
    summary = pd.read_csv(out / "latency.csv")
    assert sorted(summary["system"]) == ["bm25-pisa", "k12"]
    assert (summary["rounds"] == 2).all() and (summary["queries"] == 5).all() and (summary["median_ms"] > 0).all()
    timings = pd.read_csv(out / "latency_timings.csv")
    assert len(timings) == 4 and sorted(timings.groupby("round")["system"].first()) == ["bm25-pisa", "k12"]
    proc = subprocess.run([*cli, "report", str(out), "--bootstrap", "50"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (out / "report" / "figure1.png").stat().st_size > 10_000
