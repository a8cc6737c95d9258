"""The unit tier: no staged data, no model weights, no JVM. A test here that starts the JVM or seeds the
ir_datasets home from staged data fails, naming what it did, so misplaced tests cannot slow the tier down."""

from __future__ import annotations

import pytest
from support import unit_tier_leaks


@pytest.fixture(autouse=True)
def _stays_a_unit_test(request):
    before = set(unit_tier_leaks())
    yield
    leaks = [leak for leak in unit_tier_leaks() if leak not in before]
    if leaks:
        pytest.fail(f"{request.node.nodeid} {' and '.join(leaks)}: it belongs in tests/integration/", pytrace=False)
