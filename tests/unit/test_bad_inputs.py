"""Bad input gets one clear, actionable error and loses nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from irgrid import grid
from irgrid.experiment import ExperimentError, from_dict, load
from irgrid.models import ModelUnavailableError

GOOD = """\
name: t
datasets: [vaswani]
retrievers: [bm25-pisa]
measures: [AP]
"""


def _cli_run(tmp_path, text: str) -> subprocess.CompletedProcess:
    exp = tmp_path / "exp.yaml"
    exp.write_text(text)
    return subprocess.run([sys.executable, "-m", "irgrid.cli", "run", str(exp), "--out", str(tmp_path / "out"),
                           "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=300)


def _one_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("irgrid: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return errors[0]


def test_unknown_retriever(tmp_path):
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("bm25-pisa", "bm25-psia")))
    assert "retrievers[0]" in msg and "unknown retriever 'bm25-psia'" in msg and "Did you mean 'bm25-pisa'" in msg
    assert "exp.yaml" in msg
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_unknown_dataset(tmp_path):
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("vaswani", "vaswanni")))
    assert "datasets[0]" in msg and "Did you mean 'vaswani'" in msg


def test_malformed_yaml_names_the_line(tmp_path):
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("retrievers: [bm25-pisa]", "retrievers: [bm25-pisa")))
    assert "not valid YAML" in msg and "line" in msg


@pytest.mark.parametrize("patch, expected", [
    ({"measures": ["nDCG@ten"]}, "is not a measure ir_measures understands"),
    ({"baseline": "splade-tiny"}, "baseline 'splade-tiny' is not one of the retrievers"),
    ({"correction": "holmes"}, "correction 'holmes' is not one of"),
    ({"retrievers": ["bm25", "bm25"]}, "appear twice"),
    ({"retrievers": [{"name": "bm25", "options": {"k3": 1}}]}, "has no option(s) 'k3'"),
    ({"colour": "blue"}, "unknown key(s) ['colour']"),
])
def test_spec_errors(patch, expected):
    data = {"datasets": ["vaswani"], "retrievers": ["bm25-pisa", "bm25"], "measures": ["AP"], **patch}
    with pytest.raises(ExperimentError) as e:
        from_dict(data, source="exp.yaml")
    assert expected in str(e.value) and str(e.value).startswith("exp.yaml")


def test_missing_file():
    with pytest.raises(ExperimentError, match="does-not-exist.yaml does not exist"):
        load("does-not-exist.yaml")


def test_unresolvable_model_offline_fails_before_any_work(fresh_store, tmp_path):
    """The registered `contriever` entry: its checkpoint is on no package, mapping or cache here."""
    spec = from_dict({"datasets": ["vaswani"], "retrievers": ["bm25-pisa", "contriever"], "measures": ["AP"]})
    with pytest.raises(ModelUnavailableError, match="facebook/contriever-msmarco@abe8c14[0-9a-f]+ is not available "
                                                     "offline.*huggingface-cli download facebook/contriever-msmarco"):
        grid.run(spec, out=tmp_path / "out", store=fresh_store)
    assert not (tmp_path / "out").exists()
    assert not (fresh_store.root / "runs").exists()  # nothing computed, nothing half-written
