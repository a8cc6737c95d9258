"""The notebooks in notebooks/ run top to bottom (nbclient, a kernel of this environment) on the offline data."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from irgrid import grid
from irgrid.runner.experiment import from_dict

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
PISA_GRID = {  # PISA only: seconds, no JVM
    "name": "notebook-grid",
    "datasets": ["vaswani"],
    "retrievers": ["bm25-pisa", {"name": "bm25-pisa", "as": "bm25-pisa-k1.2", "options": {"k1": 1.2}}],
    "measures": ["AP", "nDCG@10", "R@1000"],
    "baseline": "bm25-pisa",
}


def execute(path: Path) -> None:
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == ["compose_pipeline.ipynb", "stored_grid_figures.ipynb"]
    for path in NOTEBOOKS.glob("*.ipynb"):  # committed without outputs: they are regenerated, never stale
        nb = json.loads(path.read_text())
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), path


def test_compose_pipeline_notebook(shared_store, tmp_path, monkeypatch):
    monkeypatch.setenv("IRGRID_NOTEBOOK_OUT", str(tmp_path))
    execute(NOTEBOOKS / "compose_pipeline.ipynb")  # the kernel inherits IRGRID_CACHE: the session's cache
    results = pd.read_csv(tmp_path / "results.csv")  # the notebook's pipelines ran as grid cells
    assert {"rrf-python", "top10-python", "rrf-expression", "top10-expression"} <= set(results["system"])
    assert (tmp_path / "runs" / "vaswani" / "rrf-python.res.gz").exists()


def test_stored_grid_figures_notebook(shared_store, tmp_path, monkeypatch):
    out = tmp_path / "out"
    grid.run(from_dict(PISA_GRID), out=out, store=shared_store)
    monkeypatch.setenv("IRGRID_NOTEBOOK_GRID", str(out))
    execute(NOTEBOOKS / "stored_grid_figures.ipynb")
    assert (out / "notebook-figures" / "figure1.png").exists()
    assert (out / "notebook-figures" / "jaccard-vaswani.png").exists()


@pytest.fixture(autouse=True)
def _kernel_available():
    pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
