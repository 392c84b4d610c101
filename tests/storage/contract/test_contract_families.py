"""The storage contract is five small ones (``base``); ``Storage`` is exactly their sum, and every
adapter implements each of them."""

from __future__ import annotations

import pytest

from storage_adapters import (
    BrowseStore,
    InstanceStore,
    JobStore,
    LockStore,
    OutcomeStore,
    RecurringStore,
    ReleaseStore,
    RetentionStore,
    Storage,
    StorageAdmin,
)

FAMILIES: list[type] = [
    StorageAdmin,
    JobStore,
    ReleaseStore,
    LockStore,
    RecurringStore,
    RetentionStore,
    InstanceStore,
    BrowseStore,
    OutcomeStore,
]


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
