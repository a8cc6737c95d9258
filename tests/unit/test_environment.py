"""Importing irgrid changes no environment variable; irgrid points ir_datasets at its home on first real use (a
grid run from the CLI or Python, a pipeline), before anything imports ir_datasets; pyserini's placeholder OpenAI
key exists only during pyserini's import. Fresh interpreters (subprocesses), since this session's already has
IR_DATASETS_HOME set (tests/conftest.py) and ir_datasets imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

IMPORTS = """
import json, os, sys
before = dict(os.environ)
import irgrid, irgrid.cli, irgrid.grid, irgrid.runner.cell
irgrid.list_retrievers()  # every entry module imported (pipelines/)
changed = sorted(k for k in set(before) | set(os.environ) if before.get(k) != os.environ.get(k))
try:
    {use}
except irgrid.Error as e:
    pass
print(json.dumps({{"changed": changed, "ir_datasets_imported": "ir_datasets" in sys.modules,
                   "IR_DATASETS_HOME": os.environ.get("IR_DATASETS_HOME")}}))
"""


def _fresh_python(tmp_path, use: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("IR_DATASETS_HOME", "OPENAI_API_KEY")}
    env["IRGRID_CACHE"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-c", IMPORTS.format(use=use)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_import_irgrid_changes_no_environment_variable_and_irgrid_run_points_ir_datasets_home(tmp_path):
    out = _fresh_python(tmp_path, "irgrid.run('no-such-experiment.yaml')")  # fails after pointing the home
    assert out["changed"] == [], f"importing irgrid changed {out['changed']}"
    assert not out["ir_datasets_imported"]
    assert out["IR_DATASETS_HOME"] == str(tmp_path / "cache" / "irds")


def test_irgrid_run_cli_points_ir_datasets_at_its_cache(tmp_path):
    cache = tmp_path / "elsewhere"
    out = _fresh_python(tmp_path, f"irgrid.cli.main(['run', 'no-such-experiment.yaml', '--cache', {str(cache)!r}])")
    assert out["changed"] == []
    assert out["IR_DATASETS_HOME"] == str(cache / "irds")  # --cache's own home, as the README says


def test_irgrid_pipeline_points_ir_datasets_home(tmp_path):
    out = _fresh_python(tmp_path, "irgrid.pipeline('no-such-entry', 'vaswani')")  # unknown: nothing is built
    assert out["IR_DATASETS_HOME"] == str(tmp_path / "cache" / "irds")


def test_a_users_ir_datasets_home_is_kept(tmp_path, monkeypatch):
    from irgrid.util import settings

    monkeypatch.setenv("IR_DATASETS_HOME", str(tmp_path / "mine"))
    assert settings.use_irds_home() == tmp_path / "mine" and os.environ["IR_DATASETS_HOME"] == str(tmp_path / "mine")


@pytest.mark.parametrize("key", [None, "sk-a-readers-real-key"])
def test_pyserinis_openai_placeholder_lives_only_during_its_import(monkeypatch, key):
    from irgrid.sparse.lucene import placeholder_openai_key

    if key is None:
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    else:
        monkeypatch.setenv("OPENAI_API_KEY", key)
    with placeholder_openai_key():
        assert os.environ["OPENAI_API_KEY"] == (key or "unused")  # pyserini.encode's client needs one to import
    assert os.environ.get("OPENAI_API_KEY") == key
