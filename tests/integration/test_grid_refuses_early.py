"""A grid whose model resolves nowhere offline fails before any work: nothing computed, nothing half-written."""

from __future__ import annotations

import pytest

from irgrid import grid
from irgrid.models.resolver import ModelUnavailableError
from irgrid.runner.experiment import from_dict


def test_unresolvable_model_offline_fails_before_any_work(fresh_store, tmp_path):
    """The registered `contriever` entry: its checkpoint is on no package, mapping or cache here."""
    spec = from_dict({"datasets": ["vaswani"], "retrievers": ["bm25-pisa", "contriever"], "measures": ["AP"]})
    with pytest.raises(ModelUnavailableError, match="facebook/contriever-msmarco@abe8c14[0-9a-f]+ is not available "
                                                     "offline.*huggingface-cli download facebook/contriever-msmarco"):
        grid.run(spec, out=tmp_path / "out", store=fresh_store)
    assert not (tmp_path / "out").exists()
    assert not (fresh_store.root / "runs").exists()  # nothing computed, nothing half-written

