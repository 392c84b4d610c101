"""The storage contract is nine families (``base``, ``contract/``); ``Storage`` is exactly their
sum, and every adapter implements each of them."""

from __future__ import annotations

import pytest

import storage_adapters
from storage_adapters import Storage

#: The families by name, in the order ``base.Storage`` lists them.
FAMILY_NAMES = [
    "StorageAdmin",
    "JobStore",
    "ReleaseStore",
    "LockStore",
    "RecurringStore",
    "RetentionStore",
    "InstanceStore",
    "BrowseStore",
    "OutcomeStore",
]
FAMILIES: list[type] = [getattr(storage_adapters, name) for name in FAMILY_NAMES]


def methods(protocol: type) -> set[str]:
    return {name for name, value in vars(protocol).items() if callable(value) and name[0] != "_"}


def test_storage_is_exactly_its_families() -> None:
    # Then Storage adds no method of its own, and no method sits in two families
    assert methods(Storage) == set()
    named = [name for family in FAMILIES for name in methods(family)]
    assert len(named) == len(set(named))
    assert all(issubclass(Storage, family) for family in FAMILIES)


@pytest.mark.untouched
@pytest.mark.parametrize("family", FAMILIES, ids=lambda family: family.__name__)
def test_every_adapter_implements_every_family(storage: Storage, family: type) -> None:
    assert isinstance(storage, family)
    for name in methods(family):
        assert callable(getattr(storage, name)), name
