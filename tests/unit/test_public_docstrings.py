"""Every public name of the API has a docstring with a summary line, and so does each of its
public methods and properties.

The public API is what ``parallel_scheduler``, ``parallel_scheduler.celery`` and
``storage_adapters`` export in ``__all__``; the reference pages of the documentation site render
these docstrings (mkdocstrings), so a name without one shows up there as a bare signature. A
class docstring that Python wrote itself (a dataclass's or a named tuple's ``Name(field, ...)``)
does not count. Constants and type aliases in ``__all__`` are not checked.

Enabling ruff's pydocstyle rules instead would flag hundreds of private modules' helpers; this
test holds the public surface only.
"""

from __future__ import annotations

import enum
import importlib
import inspect
from collections.abc import Iterator
from typing import Any

import pytest

#: The modules whose ``__all__`` is the public API.
PUBLIC_MODULES = ("parallel_scheduler", "parallel_scheduler.celery", "storage_adapters")
#: Where the project's own code lives: methods inherited from anything else (``Exception``,
#: ``enum.Enum``, ``typing.Protocol``, Celery's ``Task``) are that library's to document.
PROJECT_PACKAGES = ("parallel_scheduler", "storage_adapters")


def _ours(obj: Any) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module.split(".")[0] in PROJECT_PACKAGES


def _public_objects() -> Iterator[tuple[str, Any]]:
    seen: set[int] = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)) or not _ours(obj):
                continue  # a constant, a type alias, a re-exported library name
            if id(obj) in seen:  # re-exported by two modules: check it once
                continue
            seen.add(id(obj))
            yield f"{module_name}.{name}", obj


def _members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties ``cls`` has from the project's own classes."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object or not _ours(klass):
            continue
        for name, value in vars(klass).items():
            if name.startswith("_") or name in names:
                continue
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            if isinstance(value, property) or inspect.isfunction(value):
                names.add(name)
                yield name, getattr(cls, name) if not isinstance(value, property) else value


def _targets() -> list[tuple[str, Any, str | None]]:
    """``(id, object, member name)``: each public class or function, then each member."""
    found: list[tuple[str, Any, str | None]] = []
    for path, obj in _public_objects():
        found.append((path, obj, None))
        if inspect.isclass(obj) and not issubclass(obj, enum.Enum):
            found += [(f"{path}.{name}", member, name) for name, member in _members(obj)]
        elif inspect.isclass(obj):  # an Enum: its own properties and methods, not its members
            found += [
                (f"{path}.{name}", member, name)
                for name, member in _members(obj)
                if not isinstance(getattr(obj, name, None), obj)
            ]
    return found


TARGETS = _targets()


def _docstring(obj: Any, owner: str | None) -> str:
    if inspect.isclass(obj) and owner is None:
        own = obj.__dict__.get("__doc__") or ""
        generated = own.startswith(f"{obj.__name__}(")  # dataclass / NamedTuple default
        return "" if generated else inspect.cleandoc(own)
    return inspect.getdoc(obj) or ""


def test_the_public_api_is_found() -> None:
    names = {target_id for target_id, _, _ in TARGETS}
    assert "parallel_scheduler.Client" in names
    assert "parallel_scheduler.Settings.load" in names
    assert "parallel_scheduler.celery.install" in names
    assert "storage_adapters.Storage" in names


@pytest.mark.parametrize(
    ("obj", "owner"),
    [pytest.param(obj, owner, id=target_id) for target_id, obj, owner in TARGETS],
)
def test_each_public_name_has_a_docstring_with_a_summary_line(obj: Any, owner: str | None) -> None:
    doc = _docstring(obj, owner)
    summary = doc.split("\n", 1)[0].strip() if doc else ""
    assert summary, "no docstring: say what it does, its arguments and what it raises"
    assert len(summary.split()) >= 3, f"a summary line of a few words is expected, not {summary!r}"
