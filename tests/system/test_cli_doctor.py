"""`irgrid doctor` as a user runs it: what every real checkpoint of the paper's grid needs, no heavy imports, one
clear error for each bad input; and `irgrid run` refusing, before any model is loaded, a checkpoint whose declared
remote code or package is not here."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run([sys.executable, "-m", "irgrid.cli", *args], capture_output=True, text=True, timeout=180,
                          cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})})


def test_doctor_lists_every_checkpoint_of_the_paper_grid_without_torch():
    code = ("import sys, irgrid.cli\n"
            "try:\n    irgrid.cli.main(['doctor', 'experiments/paper.yaml', '--format', 'csv'])\n"
            "except SystemExit:\n    pass\n"
            "heavy = [m for m in ('torch', 'transformers', 'pyterrier') if m in sys.modules]\n"
            "assert not heavy, heavy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, cwd=ROOT,
                         env={**__import__("os").environ, "HF_HUB_OFFLINE": "1"})
    assert out.returncode == 0, out.stderr
    table = out.stdout.split("\n\n")[0]
    rows = list(csv.DictReader(io.StringIO(table)))
    assert len({r["retriever"] for r in rows}) == 33
    assert not [r for r in rows if r["status"].startswith("no declaration")]
    by = {(r["retriever"], r["role"]): r for r in rows}
    jina = by[("jina-embeddings-v3", "doc")]
    assert jina["remote_code"] == "jinaai/xlm-roberta-flash-implementation" and "einops" in jina["packages"]
    assert "gemma" in by[("embeddinggemma", "doc")]["gated"].lower()
    assert "Meta-Llama-3.1-8B-Instruct" in by[("llm2vec", "doc")]["gated"]
    assert by[("contriever", "doc")]["remote_code"] == "no" and by[("contriever", "doc")]["status"] == "ok"
    # the estimate: weights in the entry's dtype plus activations at the release's batch size
    assert by[("nv-embed-v2", "doc")]["vram_gib"].startswith("17.") and "batch 8" in by[("nv-embed-v2", "doc")]["vram_gib"]


def test_doctor_exit_code_names_what_is_missing_here():
    out = _cli("doctor", "jina-embeddings-v3", "contriever")
    import importlib.util

    have_einops = importlib.util.find_spec("einops") is not None
    assert out.returncode == 1  # the remote code repository is not staged on a test machine
    assert "stage the remote code jinaai/xlm-roberta-flash-implementation" in out.stdout
    assert ("pip install einops" in out.stdout) != have_einops
    assert "1 checkpoint(s) need something: jinaai/jina-embeddings-v3" in out.stdout
    assert _cli("doctor", "contriever", "bm25").returncode == 0


@pytest.mark.parametrize("args, message", [
    (["doctor", "jina-embedings-v3"], "unknown retriever 'jina-embedings-v3'. Did you mean 'jina-embeddings-v3'"),
    (["doctor", "experiments/paper.yaml", "--profile", "card"], "--profile applies to retriever names"),
    (["doctor", "nothere.yaml"], "experiment file nothere.yaml does not exist"),
    (["doctor", "contriever", "--profile", "model-card"], "invalid choice: 'model-card'"),
    (["doctor"], "the following arguments are required: targets"),
])
def test_doctor_bad_inputs_get_one_clear_error(args, message):
    out = _cli(*args)
    assert out.returncode == 2 and message in out.stderr and "Traceback" not in out.stderr


def test_run_refuses_a_checkpoint_whose_remote_code_is_not_here(tmp_path):
    """A staged jina-embeddings-v3 folder without its remote code repository: the grid stops in preflight, before
    any index or model is built, naming what to stage (and einops where it is missing)."""
    folder = tmp_path / "jina"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": "xlm-roberta"}))
    mapping = tmp_path / "models.json"
    mapping.write_text(json.dumps({"jinaai/jina-embeddings-v3": str(folder)}))
    exp = tmp_path / "exp.yaml"
    exp.write_text("name: t\ndatasets: [vaswani]\nretrievers: [jina-embeddings-v3]\nmeasures: [nDCG@10]\n")
    out = _cli("run", str(exp), "--cache", str(tmp_path / "cache"),
               env={"IRGRID_MODELS": str(mapping), "IRGRID_CACHE": str(tmp_path / "cache")})
    assert out.returncode != 0
    assert "checkpoints need what is not here" in out.stderr
    assert "stage the remote code jinaai/xlm-roberta-flash-implementation" in out.stderr
    assert not (tmp_path / "cache" / "indexes").exists() or not any((tmp_path / "cache" / "indexes").iterdir())
