"""The public surface, checked both ways (httpx's ``test_exported_members``): every public
name a package defines is in its ``__all__``, and every name in ``__all__`` exists."""

from __future__ import annotations

import importlib
import types

import pytest

PACKAGES = ["icefloe", "icefloe.coordinator", "icefloe.enumerator", "icefloe.errors",
            "icefloe.state"]
NOT_API = {"TYPE_CHECKING", "Any", "annotations", "importlib"}


@pytest.mark.parametrize("name", PACKAGES)
def test_all_is_sorted_and_every_export_exists(name: str) -> None:
    module = importlib.import_module(name)
    exported = list(module.__all__)
    assert exported == sorted(exported), f"{name}.__all__ is not sorted"
    assert len(set(exported)) == len(exported)
    for member in exported:
        assert getattr(module, member) is not None, f"{name}.{member} is exported, missing"


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_name_is_exported(name: str) -> None:
    module = importlib.import_module(name)
    lazy = set(getattr(module, "_LAZY", {}))
    public = {
        member for member, value in vars(module).items()
        if not member.startswith("_") and member not in NOT_API
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", name).startswith("icefloe")
    }
    missing = (public | lazy) - set(module.__all__)
    assert not missing, f"public names of {name} not in __all__: {sorted(missing)}"


def test_stream_types_users_receive_are_exported() -> None:
    import icefloe
    from icefloe.local.stream import LocalStream

    assert icefloe.LocalStream is LocalStream
    assert icefloe.StreamItem.__module__ == "icefloe.coordinator.item"
    assert issubclass(icefloe.UnknownSplitError, icefloe.IcefloeError)
    assert issubclass(icefloe.UnknownSplitError, KeyError)
