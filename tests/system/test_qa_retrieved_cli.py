"""`irgrid qa run` as a user starts it, in a fresh interpreter with no IR_DATASETS_HOME: the Retrieved setting
after a reader has already been built (pyterrier-rag and pyterrier-dr import ir_datasets themselves, before irgrid
opens the derived collection). The regression of issue 40 stopped exactly there; the heavy test of
experiments/disastqa.yaml runs in-process under the test session's own home and could not see it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import yaml

pytestmark = pytest.mark.slow  # SmolLM2 reads 3 items twice, a JVM starts for Lucene: about a minute on 2 cores

EXPERIMENT = Path(__file__).resolve().parents[2] / "experiments" / "disastqa.yaml"


def test_qa_run_answers_the_retrieved_setting_from_a_fresh_interpreter(tmp_path):
    spec = yaml.safe_load(EXPERIMENT.read_text())
    spec.update(name="disastqa-retrieved-smoke", tasks={"mcq": {"n": 2, "seed": 42, "stratify": "answer"},
                                                        "oe": {"n": 1, "seed": 42, "stratify": "difficulty"}},
                settings=["golden", {"retrieved": "bm25", "k": 5}],
                collection={"scope": "subset", "distractors": 20, "seed": 42},
                measures={"oe": ["ROUGE-L", "ROUGE-L-paper"]}, bootstrap={"samples": 50, "seed": 0})
    spec.pop("bertscore", None)
    spec.pop("coverage", None)
    experiment = tmp_path / "smoke.yaml"
    experiment.write_text(yaml.safe_dump(spec))
    env = {k: v for k, v in os.environ.items() if k != "IR_DATASETS_HOME"}  # as a user's shell has it
    env["IRGRID_CACHE"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-m", "irgrid.cli", "qa", "run", str(experiment), "--out",
                           str(tmp_path / "out")], env=env, capture_output=True, text=True, timeout=900, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = pd.read_csv(tmp_path / "out" / "results.csv")
    assert set(results.setting) == {"golden", "retrieved-bm25"}
    items = pd.read_csv(tmp_path / "out" / "items.csv")
    retrieved = items[items.setting == "retrieved-bm25"]
    assert len(retrieved) == 3 and retrieved["evidence_docnos"].str.count("dq-").eq(5).all()  # top-5 passages
    retrieval = pd.read_csv(tmp_path / "out" / "retrieval.csv")
    assert set(retrieval.retriever) == {"bm25"} and retrieval.value.between(0, 1).all()
    assert (tmp_path / "cache" / "irds").is_dir()  # ir_datasets wrote into irgrid's home, not ~/.ir_datasets
