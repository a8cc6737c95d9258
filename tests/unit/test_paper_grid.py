"""experiments/paper.yaml is `irgrid.paper`'s grid, and it runs end to end in tiny-model mode on what is staged."""

from __future__ import annotations

from pathlib import Path

import yaml

from irgrid import paper

ROOT = Path(__file__).resolve().parents[2]
PAPER_YAML = ROOT / "experiments" / "paper.yaml"


def test_paper_yaml_is_the_papers_grid():
    spec = yaml.safe_load(PAPER_YAML.read_text())
    assert spec["datasets"] == paper.datasets()  # 3 + 13 + 12 forums + 2 + 1 + 3 = 34
    assert len(spec["datasets"]) == 34 and len(spec["retrievers"]) == 33
    assert spec["aggregates"] == list(paper.PAPER_AGGREGATES)
    assert "beir/webis-touche2020" not in spec["datasets"]  # v2 only


def test_paper_expected_file_names_cells_of_the_grid():
    from irgrid.data import datasets
    from irgrid.report.check import load_expected

    spec = yaml.safe_load(PAPER_YAML.read_text())
    expected = load_expected(ROOT / "experiments" / "paper.expected.yaml")
    assert len(expected) == 13
    for e in expected:
        assert e.dataset in spec["datasets"] and e.system in spec["retrievers"] and e.source
        assert e.measure in datasets.get(e.dataset).measures


def test_every_paper_column_is_a_catalog_cell():
    """Every component of every column names a catalog dataset and one of its own measures."""
    from irgrid.data import datasets

    for col in paper.COLUMNS:
        for names, measure in col.components:
            assert measure in datasets.get(names[0]).measures, (col.table, col.column, names[0], measure)
