"""The notebooks in notebooks/ run top to bottom (nbclient, a kernel of this environment) on the offline data, and
print none of the native chatter the CLI silences (PISA's [info] lines, JVM warnings) nor tqdm's IProgress warning
(ipywidgets is installed with the `notebook` extra: progress bars are widgets)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
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


CHATTER = ("[info]", "WARNING: ", "IProgress not found", "TqdmWarning",  # PISA's spdlog, the JVM, tqdm without widgets
           "Traceback", "UserWarning", "Loading weights")  # an offline HTML repr, libraries' own bars (issue 41)
WIDGET = "application/vnd.jupyter.widget-view+json"


def execute(path: Path, grid_cells: tuple[str, ...] = ("irgrid.run(",)):
    """Run the notebook; no error, no chatter, and in the cells that run a grid no library progress bar: irgrid's
    own progress is at most one line per stage (issue 41: 153 bars, one per latency-sample query)."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    assert all(c.get("id") for c in nb.cells), f"{path.name}: cells without ids"
    NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.output_type == "error"]
    assert not errors, errors
    printed = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert not [c for c in CHATTER if c in printed], printed[-3000:]
    for cell in nb.cells:
        if cell.cell_type != "code" or not any(g in cell.source for g in grid_cells):
            continue
        bars = [o for o in cell.get("outputs", []) if o.output_type == "display_data" and WIDGET in o.get("data", {})]
        assert not bars, f"{len(bars)} progress bars in the grid's cell"
        text = "".join(o.get("text", "") for o in cell.get("outputs", []) if o.output_type == "stream")
        assert "\x1b[" not in text and len(text.splitlines()) <= 20, text[-2000:]  # a few lines per index build
    return nb


def test_every_notebook_is_tested():
    assert sorted(p.name for p in NOTEBOOKS.glob("*.ipynb")) == ["compose_pipeline.ipynb", "idea_to_table.ipynb",
                                                                 "stored_grid_figures.ipynb"]
    for path in NOTEBOOKS.glob("*.ipynb"):  # committed without outputs: they are regenerated, never stale
        nb = json.loads(path.read_text())
        assert all(not c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code"), path
        assert all(c.get("id") for c in nb["cells"]), f"{path.name}: cells without ids (nbformat 4.5)"
        code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
        assert "../results" not in code, f"{path.name} writes into the checkout"  # temporary folders only


def test_compose_pipeline_notebook(shared_store, tmp_path, monkeypatch):
    monkeypatch.setenv("IRGRID_NOTEBOOK_OUT", str(tmp_path))
    execute(NOTEBOOKS / "compose_pipeline.ipynb")  # the kernel inherits IRGRID_CACHE: the session's cache
    results = pd.read_csv(tmp_path / "results.csv")  # the notebook's pipelines ran as grid cells
    assert {"rrf-python", "top10-python", "rrf-expression", "top10-expression"} <= set(results["system"])
    assert (tmp_path / "runs" / "vaswani" / "rrf-python.res.gz").exists()


@pytest.mark.slow  # MiniLM re-ranks 30 x 20 candidates on CPU (real weights, shipped offline)
def test_idea_to_table_notebook(shared_store, tmp_path, monkeypatch):
    monkeypatch.setenv("IRGRID_NOTEBOOK_OUT", str(tmp_path))
    execute(NOTEBOOKS / "idea_to_table.ipynb")
    results = pd.read_csv(tmp_path / "results.csv")
    assert set(results["system"]) == {"bm25-pisa", "bm25-prf", "bm25-minilm"}  # Python pipeline + expression
    tested = results[(results["system"] != "bm25-pisa") & (results["measure"] != "ms/query")]
    assert tested["p_value_corrected"].between(0, 1).all() and set(tested["measure"]) == {"nDCG@10", "P@10", "RR@10"}
    assert (tmp_path / "per_query_delta.png").stat().st_size > 0
    assert (tmp_path / "runs" / "vaswani@q30s0" / "bm25-prf.res.gz").exists()


@pytest.mark.slow  # a Lucene index of Vaswani (shared with other tests through the session's cache) and a JVM
def test_python_api_is_as_quiet_as_the_cli(shared_store):
    """Lucene (JVM start-up warnings) and PISA (per-parameter [info] lines) through the Python API print nothing
    of their own; `IRGRID_VERBOSE=1` (the CLI's -v) shows it again."""
    code = ("import irgrid; t = irgrid.pipeline('bm25', 'vaswani').search('dielectric constant'); assert len(t); "
            "p = irgrid.retriever('bm25-pisa').with_options(name='x', k1=1.37).pipeline('vaswani'); "
            "assert len(p.search('dielectric constant'))")
    env = {**os.environ, "IRGRID_CACHE": str(shared_store.root)}
    quiet = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0, quiet.stderr
    assert not [c for c in CHATTER if c in quiet.stdout + quiet.stderr], quiet.stdout + quiet.stderr
    pisa = code.split("; ", 3)[-1].replace("1.37", "1.38")  # new parameters: PISA writes (and prints) again
    loud = subprocess.run([sys.executable, "-c", "import irgrid; " + pisa], env={**env, "IRGRID_VERBOSE": "1"},
                          capture_output=True, text=True, timeout=600)
    assert loud.returncode == 0 and "[info]" in loud.stdout + loud.stderr, loud.stderr


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


BARS_CELL = '''import pyterrier as pt

import irgrid

bm25 = irgrid.pipeline("bm25-pisa", "vaswani")


class MyStep(pt.Transformer):  # a Python system whose step draws a PyTerrier bar on every call
    def transform(self, df):
        for _ in pt.tqdm(range(1), desc="my step"):
            pass
        return df


r = irgrid.run({"name": "bars", "datasets": [{"name": "vaswani", "queries": 20, "seed": 0}], "retrievers": ["bm25-pisa"],
                "measures": ["AP"], "latency_sample": 10}, OUT, extra={"mine": bm25 >> MyStep()}, keys={"mine": "bars-v1"})
assert r.ok, r.failures'''


def test_a_python_system_in_a_notebook_grid_draws_no_bar_per_query(shared_store, tmp_path):
    """Issue 41: `irgrid.run(..., extra=...)` in Jupyter printed one `0/1 ... 1/1` bar per latency-sample query per
    Python system (here 12: warm-up, the run, 10 samples; measured 24 bar lines before the fix), the CLI none."""
    import nbformat

    path = tmp_path / "bars.ipynb"
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(f"OUT = {str(tmp_path / 'out')!r}\n" + BARS_CELL)]
    nbformat.write(nb, path)
    outputs = execute(path).cells[0].outputs
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    widgets = [o for o in outputs if o.output_type == "display_data" and WIDGET in o.get("data", {})]
    assert "my step" not in text and not widgets, text[-2000:]
