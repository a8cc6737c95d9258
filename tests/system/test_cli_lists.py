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
    assert list(next(iter(rows.values()))) == ["id", "group", "measures", "policies", "conventions", "queries",
                                               "docs", "counts_source", "ir_datasets", "corpus"]
    # which measure follows the paper's code and which the official tool
    assert rows["followir/core17"]["conventions"] == "changed:=paper og:=FollowIR p-MRR-paper=paper p-MRR=MTEB"
    assert rows["msmarco-passage/trec-dl-2020/judged"]["conventions"] == "R@1000=paper (rel>=1) R(rel=2)@1000=TREC/Pyserini"
    assert rows["beir/arguana/test"]["policies"] == "fields=title+text drop_self_matches"
    assert rows["instructir"]["measures"] == "nDCG@10 Robustness@10"
    assert rows["msmarco-passage/dev/small"]["queries"] == "6980"
    table = subprocess.run([sys.executable, "-m", "irgrid.cli", "datasets", "--group", "lotte"],
                           capture_output=True, text=True, check=True, env=env, timeout=120).stdout
    assert "lotte/pooled/test/search" in table and "beir/" not in table


def test_list_shows_profile_differences_with_sources_without_torch():
    code = ("import sys; from irgrid.cli import main; main(['list', 'bge-large-v1.5']); "
            "main(['list', '--profiles', '--family', 'late-interaction', '--format', 'csv']); "
            "assert 'torch' not in sys.modules, 'irgrid list imported torch'")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "query_template" in out and "'{text}'" in out and "src/encoders/dense_encoder.py@4bedb75" in out
    assert "doc_fields" in out and "MTEB retrieval corpus" in out
    assert "colbertv2,doc_max_length,300,180,valentinsvelev/retriever-evaluation:src/models/colbert.py" in out

