"""A Lucene-backed pipeline, built and searched by `irgrid.pipeline` in a fresh interpreter that never set
IR_DATASETS_HOME: ir_datasets opens irgrid's home (inside IRGRID_CACHE), and OPENAI_API_KEY is afterwards what it
was before (unset), although pyserini's import needed a placeholder (vaswani, 11k docs)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

SEARCH = """
import json, os, sys
import irgrid
hits = irgrid.pipeline("bm25", "vaswani").search("measurement of dielectric constant of liquids")
import ir_datasets
print(json.dumps({"OPENAI_API_KEY": os.environ.get("OPENAI_API_KEY"), "hits": len(hits),
                  "searched_with_pyserini": "pyserini.search.lucene" in sys.modules,
                  "ir_datasets_home": str(ir_datasets.util.home_path())}))
"""


@pytest.mark.slow  # one fresh interpreter: the JVM, Lucene indexing and pyserini's import (torch) ~30 s CPU
def test_a_lucene_pipeline_leaves_openai_api_key_unset_and_uses_irgrids_home(tmp_path):
    """Unset before, unset after (a key that was set stays untouched: tests/unit/test_environment.py)."""
    env = {k: v for k, v in os.environ.items() if k not in ("IR_DATASETS_HOME", "OPENAI_API_KEY")}
    env["IRGRID_CACHE"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-c", SEARCH], env=env, capture_output=True, text=True, timeout=600,
                          cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout.splitlines()[-1])
    assert out["hits"] > 0 and out["searched_with_pyserini"]
    assert out["OPENAI_API_KEY"] is None
    assert out["ir_datasets_home"] == str(tmp_path / "cache" / "irds")
