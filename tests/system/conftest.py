"""The system tier: irgrid as a user runs it (CLI subprocesses, kills and races, Ray/Slurm executors, notebooks,
end-to-end grids) on the staged collections; skipped, with the reason, when nothing is staged."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _needs_staged_data(staged):
    """`staged` skips when IRGRID_IRDS_STAGED / IRGRID_SHARED name no staged ir_datasets home."""
