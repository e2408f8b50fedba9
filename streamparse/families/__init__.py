"""One module per format family; each declares its `FORMATS` on the shared engine.

A module added here is found by name: it only has to define `FORMATS: tuple[FormatSpec, ...]`.
"""

from __future__ import annotations

import importlib
import pkgutil

from ..spec import FormatSpec


def _discover() -> tuple[FormatSpec, ...]:
    found: list[FormatSpec] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found.extend(getattr(module, "FORMATS", ()))
    return tuple(found)


FAMILIES: tuple[FormatSpec, ...] = _discover()
