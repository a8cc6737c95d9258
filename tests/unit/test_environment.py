"""Importing irgrid changes no environment variable; irgrid points ir_datasets at its home when ir_datasets is first
imported, by whatever code (irgrid itself, pyterrier-dr, pyterrier-rag, a user's script); pyserini's placeholder OpenAI
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
imported, home_var = "ir_datasets" in sys.modules, os.environ.get("IR_DATASETS_HOME")
{then}
import ir_datasets.util
print(json.dumps({{"changed": changed, "ir_datasets_imported": imported,
                   "IR_DATASETS_HOME": home_var,
                   "home": str(ir_datasets.util.home_path())}}))
"""


def _fresh_python(tmp_path, use: str, then: str = "pass") -> dict:
    # staged data plays no part here (IRGRID_SHARED=/nonexistent, the unit tier's no-data check, is an error)
    env = {k: v for k, v in os.environ.items()
           if k not in ("IR_DATASETS_HOME", "OPENAI_API_KEY", "IRGRID_SHARED", "IRGRID_IRDS_STAGED")}
    env["IRGRID_CACHE"] = str(tmp_path / "cache")
    proc = subprocess.run([sys.executable, "-c", IMPORTS.format(use=use, then=then)], env=env, capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.splitlines()[-1])


def test_import_irgrid_changes_no_environment_variable_and_ir_datasets_finds_irgrids_home(tmp_path):
    out = _fresh_python(tmp_path, "irgrid.run('no-such-experiment.yaml')")  # fails before any dataset is opened
    assert out["changed"] == [], f"importing irgrid changed {out['changed']}"
    assert not out["ir_datasets_imported"] and out["IR_DATASETS_HOME"] is None  # nothing changed until then
    assert out["home"] == str(tmp_path / "cache" / "irds")  # ...and imported later, it is irgrid's home


@pytest.mark.parametrize("first", [
    "import pyterrier_dr",  # a library that imports ir_datasets itself (the Retrieved setting's failure)
    # irgrid.dataset({...}) as the very first call: a bring-your-own collection of three files
    "open('d.jsonl', 'w').write('{\"_id\": \"d1\", \"text\": \"flood warnings\"}\\n'); "
    "open('t.tsv', 'w').write('q1\\tflood\\n'); open('q.txt', 'w').write('q1 0 d1 1\\n'); "
    "irgrid.dataset({'name': 'mine', 'docs': 'd.jsonl', 'topics': 't.tsv', 'qrels': 'q.txt'})",
    "import irgrid.data.datasets; irgrid.data.datasets.get('no/such/dataset')",  # the benchmarks' door
])
def test_whoever_imports_ir_datasets_first_it_gets_irgrids_home(tmp_path, first):
    out = _fresh_python(tmp_path, first)
    assert out["ir_datasets_imported"]
    assert out["IR_DATASETS_HOME"] == out["home"] == str(tmp_path / "cache" / "irds")


def test_the_home_follows_the_settings_current_when_ir_datasets_is_imported(tmp_path):
    """`--cache DIR` (a `settings.using` block around the command) gives DIR/irds."""
    cache = tmp_path / "elsewhere"
    out = _fresh_python(tmp_path, "pass", then=(
        "from irgrid.util import settings\n"
        f"with settings.using(settings.Settings.from_env(os.environ, cache={str(cache)!r})):\n"
        "    import ir_datasets"))
    assert out["home"] == str(cache / "irds")


def test_irgrid_pipeline_points_ir_datasets_home(tmp_path):
    out = _fresh_python(tmp_path, "irgrid.pipeline('no-such-entry', 'vaswani')")  # unknown: nothing is built
    assert out["home"] == str(tmp_path / "cache" / "irds")


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
