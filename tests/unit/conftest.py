"""The unit tier: no staged data, no model weights, no JVM. A test here that starts the JVM or seeds the
ir_datasets home from staged data fails, naming what it did, so misplaced tests cannot slow the tier down.

Seeding is caught per test (a spy on `ensure_irds_home`, which copies the staged home on every first use in a
process), not only by what the home looks like afterwards: once one test had seeded it, every later one could.
"""

from __future__ import annotations

import pytest
from support import unit_tier_leaks


@pytest.fixture(autouse=True)
def _stays_a_unit_test(request, monkeypatch):
    from irgrid.data import datasets
    from irgrid.util import settings

    seeded: list[bool] = []
    real = datasets.ensure_irds_home

    def spy():
        seeded.append(settings.staged_irds_home() is not None)
        return real()

    monkeypatch.setattr(datasets, "ensure_irds_home", spy)
    before = set(unit_tier_leaks())
    yield
    leaks = [leak for leak in unit_tier_leaks() if leak not in before]
    if any(seeded):
        leaks.append("opened ir_datasets with the staged home (irgrid.data.datasets.ensure_irds_home)")
    if leaks:
        pytest.fail(f"{request.node.nodeid} {' and '.join(leaks)}: it belongs in tests/integration/", pytrace=False)
