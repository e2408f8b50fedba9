"""The formats streamparse knows, by name and alias."""

from __future__ import annotations

from functools import cache

from .spec import FormatSpec


@cache
def _registry() -> dict[str, FormatSpec]:
    from .families import FAMILIES

    names: dict[str, FormatSpec] = {}
    for spec in FAMILIES:
        for name in (spec.name, *spec.aliases):
            names[name] = spec
    return names


def formats() -> list[str]:
    """Every accepted format name, aliases included."""
    return sorted(_registry())


def get_format(name: str) -> FormatSpec:
    """The format called `name` (or an alias of it); `ValueError` listing the known names otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"format must be a format name (str), got {type(name).__name__}")
    spec = _registry().get(name)
    if spec is None:
        raise ValueError(f"unknown format {name!r}; known formats: {', '.join(formats())}")
    return spec
