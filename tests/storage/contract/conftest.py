"""The contract suite runs on every adapter kind, the Redis Cluster and sharded stores included
(``CONTRACT_ADAPTERS``): one contract, one suite, every way a store can be built.

A test marked ``untouched`` only makes calls the contract must refuse, and asserts the store is
still empty (or only reads it): its ``storage`` is one set-up store per adapter kind and test
module, shared by those tests, instead of a store set up and dropped for each. Setting a store
up (on a sharded kind, each shard's tables or keys) costs far more than such a test's calls; a
refusal that wrote something anyway still fails its own assertion, and every test after it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import storage_adapters
from storage_adapters import Storage
from tests.conftest import CONTRACT_ADAPTERS, shards_for, storage_url, unique_prefix


@pytest.fixture(params=CONTRACT_ADAPTERS, scope="module")
def adapter_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="module")
def untouched_storage(
    adapter_kind: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Storage]:
    """The module's shared store of ``adapter_kind`` for its ``untouched`` tests."""
    folder: Path = tmp_path_factory.mktemp("untouched")
    url = storage_url(adapter_kind, folder)
    store = storage_adapters.from_url(url, prefix=unique_prefix(), shards=shards_for(adapter_kind))
    store.setup()
    yield store
    store.drop()
    store.close()


@pytest.fixture
def storage(request: pytest.FixtureRequest, make_storage: object) -> Storage:
    """A fresh, set-up storage under a prefix no other test uses; for an ``untouched`` test,
    the module's shared one of its adapter kind."""
    if request.node.get_closest_marker("untouched") is not None:
        shared: Storage = request.getfixturevalue("untouched_storage")
        return shared
    return make_storage()  # type: ignore[operator,no-any-return]
