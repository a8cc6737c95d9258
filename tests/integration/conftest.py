"""The integration tier: real code on the staged collections (found through irgrid.util.settings) with shipped or
tiny weights. Without staged data every test here is skipped, with the setting to fix in the reason."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _needs_staged_data(staged):
    """`staged` skips when IRGRID_IRDS_STAGED / IRGRID_SHARED name no staged ir_datasets home."""
