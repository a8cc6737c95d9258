"""Every script in benchmarks/ runs, on a few documents, as a user starts it: a fresh interpreter with no
IR_DATASETS_HOME (issue 40: `benchmarks/encode.py` failed on its first dataset read and no test ran it). What
each prints is checked for the figures it promises; the figures themselves are machine-dependent and not
asserted (speed belongs to the scripts, not to tests)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # a fresh interpreter per script, a JVM for the Lucene ones: ~3 min on 2 cores

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"

# script -> (arguments, what its output must contain, extra environment); {tmp} is the test's folder
SMOKE: dict[str, tuple[list[str], list[str], dict[str, str]]] = {
    "bm25_latency.py": (["--dataset", "vaswani", "--repeats", "1"], ["bm25-pisa", "ratio"], {}),
    "bm25_fidelity.py": (["--datasets", "vaswani", "--repeats", "1"], ["bm25-lucene-pisa", "nDCG@10"], {}),
    "first_grid.py": (["--dataset", "vaswani", "--docs", "40", "--repeats", "1"],
                      ["pyterrier-dr doc_encoder (baseline)", "docs/s"], {}),
    "encode.py": (["--dataset", "vaswani", "--docs", "40", "--batch-size", "8", "--device", "cpu",
                   "--seconds", "0.5", "--shapes", "minilm-l6", "--seq", "32"],
                  ["docs/s", "ceiling docs/s", "impacts identical: True"], {}),
    "search.py": (["--docs", "3000", "--dim", "32", "--queries", "16", "--k", "10", "--batch", "8",
                   "--device", "cpu"], ["p50"], {}),
    "load.py": (["--rounds", "1", "--copies", "1"], ["batched", "q/s", "RSS"], {}),
    "lucene_threads.py": (["--docs", "2000", "--work", "{tmp}/scale"], ["speed-up"], {}),
    "scale.py": (["--sizes", "300", "--backends", "pisa", "dense-384", "--extra-sizes", "--total-min", "5",
                  "--work", "{tmp}/scale", "--out", "{tmp}/out"], ["pisa"], {}),
    "scifact_minilm_engine.py": ([], ["engine_ndcg@10"], {"IRGRID_TINY_MODELS": "1"}),
    "claims_paper_grid.py": (["--out", "{tmp}/claims", "--scale", "0.01"], ["irgrid claims: 28 claims"], {}),
}
NOT_RUN = {"gpu_check.sh": "drives the scripts above on a GPU machine (benchmarks/gpu_check.sh); syntax-checked"}


def test_every_benchmark_script_has_a_smoke_run():
    scripts = {p.name for p in BENCH.iterdir() if p.suffix in (".py", ".sh")}
    assert scripts == set(SMOKE) | set(NOT_RUN), "add the new script to SMOKE (a few documents) or NOT_RUN"


def test_gpu_check_script_parses():
    assert subprocess.run(["bash", "-n", str(BENCH / "gpu_check.sh")]).returncode == 0


@pytest.mark.parametrize("script", sorted(SMOKE))
def test_benchmark_runs_on_a_few_documents(script, tmp_path):
    args, expected, extra_env = SMOKE[script]
    env = {k: v for k, v in os.environ.items() if k != "IR_DATASETS_HOME"}  # as a user's shell has it
    env.update(IRGRID_CACHE=str(tmp_path / "cache"), **extra_env)
    cmd = [sys.executable, str(BENCH / script), *(a.replace("{tmp}", str(tmp_path)) for a in args)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600, cwd=BENCH)
    assert proc.returncode == 0, f"{' '.join(cmd)}\n{proc.stdout[-2000:]}\n{proc.stderr[-3000:]}"
    for text in expected:
        assert text in proc.stdout, f"{script} printed no {text!r}:\n{proc.stdout[-2000:]}"
