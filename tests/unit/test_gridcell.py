"""The grid-cell protocol and the entries' typed wiring (issue 33): entries and expressions are cells side by side
(an expression holds its parts, it is not an entry), `options` holds only knobs, the wiring that left it keys
exactly as before, and an entry builds through the runner without any hook filled at import."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from irgrid.core.gridcell import GridCell
from irgrid.core.retrievers import RETRIEVERS, Retriever, get

ROOT = Path(__file__).resolve().parents[2]
# Expression.key() of experiments/compose.yaml's pipelines, computed before Expression stopped subclassing Retriever
# (commit 6c771fa): the expression keys, which test_golden_keys does not cover, are unchanged by the refactor
COMPOSE_KEYS = {"bm25-minilm": "f5a11f37785e", "rrf-bm25-minilm": "3751b0c45d31",
                "linear-bm25-minilm": "1b5d72b13873"}


@pytest.fixture(scope="module")
def compose():
    from irgrid.runner.experiment import load

    return load(ROOT / "experiments" / "compose.yaml")


def test_entries_and_expressions_are_grid_cells_and_an_expression_is_no_entry(compose, monkeypatch):
    monkeypatch.delenv("IRGRID_TINY_MODELS", raising=False)
    from irgrid.runner.expressions import Expression

    assert all(isinstance(r, GridCell) for r in RETRIEVERS)
    pipelines = {r.name: r for r in compose.retrievers if isinstance(r, Expression)}
    assert {n: p.key() for n, p in pipelines.items()} == COMPOSE_KEYS
    cascade = pipelines["bm25-minilm"]
    assert isinstance(cascade, GridCell) and not isinstance(cascade, Retriever)
    assert cascade.family == "pipeline" and cascade.index is None and cascade.depth() == 100
    assert set(cascade.parts) == {"bm25", "all-minilm-l6-v2"}
    assert set(cascade.all_models()) == {"all-minilm-l6-v2:query", "all-minilm-l6-v2:doc"}
    # a part's configuration is in the expression's: another MiniLM query length is another key
    other = dict(cascade.parts, **{"all-minilm-l6-v2": cascade.parts["all-minilm-l6-v2"].with_options(
        query_max_length=64)})
    import dataclasses

    assert dataclasses.replace(cascade, parts=other).key() != cascade.key()


def test_options_hold_only_knobs_and_the_wiring_keys_as_before():
    from irgrid.dense.spec import EncoderSpec, SideSpec

    for entry in RETRIEVERS:
        assert not set(entry.options) & set(entry.wiring), entry.name  # a hint names no option
        assert not any(isinstance(v, (SideSpec, EncoderSpec)) for v in entry.options.values()), entry.name
    minilm = get("all-minilm-l6-v2")
    assert isinstance(minilm.encoder, EncoderSpec) and "encoder" not in minilm.options
    keyed = minilm.keyed_options()
    assert keyed["encoder"] == "all-minilm-l6-v2"
    assert keyed["query_config"].config() == SideSpec(minilm.encoder, "q").config()
    # HyDE: its encoder's settings come with the entry it wraps (keyed as when they were copied into its options)
    hyde = get("hyde")
    assert hyde.wraps is not None and hyde.wraps.name == "contriever" and hyde.encoder is hyde.wraps.encoder
    assert "query_max_length" not in hyde.options and "query_max_length" in hyde.keyed_options()
    assert hyde.options["encoder"] == "contriever"  # a knob here: the entry HyDE wraps
    # a re-ranker's head follows its checkpoint
    assert get("monot5-base").head == "monot5" and "kind" not in get("monot5-base").options
    assert get("monot5-base").keyed_options()["kind"] == "monot5"


def test_a_profiled_dense_entry_carries_its_profiled_spec():
    paper = get("contriever").with_profile("paper")
    card = get("contriever").with_profile("card")
    assert paper.encoder is not None and card.encoder is not None
    assert {k: getattr(paper.encoder, k) for k in paper.options if hasattr(paper.encoder, k)} == \
        {k: v for k, v in paper.options.items() if hasattr(paper.encoder, k)}


def test_an_entry_builds_through_the_runner_without_a_hook_filled_at_import():
    """Only the declarative layer imported: `.pipeline(ds)` still reaches the one builder (which then asks for a
    dataset), and `irgrid list`'s module set is untouched by it until called."""
    code = ("import sys\n"
            "from irgrid.core.retrievers import get\n"
            "import irgrid.core.retrievers as r\n"
            "assert not hasattr(r, 'PIPELINE_BUILDER')\n"
            "assert 'irgrid.runner.build' not in sys.modules\n"
            "try:\n"
            "    get('bm25').pipeline(None)\n"
            "except ValueError as e:\n"
            "    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "bm25.pipeline() needs a dataset" in out.stdout
