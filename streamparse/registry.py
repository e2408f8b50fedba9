"""The formats streamparse knows, by name and alias."""

from __future__ import annotations

from functools import cache

from .spec import FormatSpec, check_suffix


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


def suffixed_formats() -> list[str]:
    """The formats whose markers carry a suffix (`FormatSpec.marker_suffix`), by name."""
    from .families import FAMILIES

    return [spec.name for spec in FAMILIES if spec.marker_suffix is not None]


def get_format(name: str, marker_suffix: str | None = None) -> FormatSpec:
    """The format called `name` (or an alias of it), with its markers spelled with `marker_suffix`
    where given; `ValueError` listing the known names otherwise."""
    if not isinstance(name, str):
        raise TypeError(f"format must be a format name (str), got {type(name).__name__}")
    spec = _registry().get(name)
    if spec is None:
        raise ValueError(f"unknown format {name!r}; known formats: {', '.join(formats())}")
    if marker_suffix is not None:
        check_suffix(marker_suffix)
        if spec.marker_suffix is None:
            raise ValueError(f"format {spec.name!r} spells its markers one way; marker_suffix applies to formats "
                             f"whose markers carry a suffix ({', '.join(suffixed_formats())})")
        return spec.marker_suffix.fill(marker_suffix)
    return spec
