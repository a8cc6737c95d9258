"""`irgrid report --no-figures` (tables and text only) and the per-query difference figure of a grid too wide for a
panel per system (one strip per system instead: a paper-sized grid spent minutes in per-panel layout)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from irgrid import cli
from irgrid.report import figures

N_SYSTEMS = figures.MAX_DELTA_PANELS + 3


@pytest.fixture
def wide_grid(tmp_path):
    rng = np.random.default_rng(0)
    systems = ["bm25"] + [f"sys{i:02d}" for i in range(1, N_SYSTEMS)]
    perq = [{"dataset": "vaswani", "system": s, "measure": "nDCG@10", "qid": str(q),
             "value": float(np.clip(0.4 + 0.02 * i + rng.normal(0, 0.1), 0, 1))}
            for i, s in enumerate(systems) for q in range(25)]
    perq = pd.DataFrame(perq)
    results = perq.groupby(["dataset", "system", "measure"], as_index=False)["value"].mean()
    results = results.assign(p_value=None, p_value_corrected=None, significant=None, baseline="bm25")
    results.to_csv(tmp_path / "results.csv", index=False)
    perq.to_csv(tmp_path / "perquery.csv", index=False)
    (tmp_path / "manifest.json").write_text(json.dumps({"experiment": "wide", "retrievers": {}}))
    return tmp_path


def test_a_wide_grid_gets_one_strip_per_system_and_no_figures_removes_them(wide_grid, capsys):
    assert cli.main(["report", str(wide_grid), "--bootstrap", "50"]) == 0
    report = wide_grid / "report"
    delta = report / "delta-vaswani.png"
    assert delta.read_bytes()[:4] == b"\x89PNG"
    import matplotlib.image

    height, width = matplotlib.image.imread(delta).shape[:2]
    assert height < 0.6 * (3.0 * 150 * -(-(N_SYSTEMS - 1) // 3))  # strips, not four rows of 3-inch panels
    assert "![delta-vaswani](delta-vaswani.png)" in (report / "report.md").read_text()

    assert cli.main(["report", str(wide_grid), "--bootstrap", "50", "--no-figures"]) == 0
    assert not [p for p in report.iterdir() if p.suffix in (".png", ".svg", ".pdf")]  # earlier figures gone
    md = (report / "report.md").read_text()
    assert "](delta-" not in md and "](jaccard-" not in md
    assert (report / "results.md").exists() or (report / "report.html").exists()
