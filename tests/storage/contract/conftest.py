"""The contract suite runs on every adapter kind, the Redis Cluster and sharded stores included
(``CONTRACT_ADAPTERS``): one contract, one suite, every way a store can be built."""

from __future__ import annotations

import pytest

from tests.conftest import CONTRACT_ADAPTERS


@pytest.fixture(params=CONTRACT_ADAPTERS)
def adapter_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)
