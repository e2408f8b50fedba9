"""The formats streamparse knows, by name and alias: the declared ones (`families/`) and those
registered at run time (`register_format`)."""

from __future__ import annotations

import sys
from functools import cache
from threading import Lock

from .spec import FormatSpec, check_suffix

# Formats registered at run time, by name and alias. Read without a lock (a dict lookup is atomic);
# changed under `_REGISTERING`.
_REGISTERED: dict[str, FormatSpec] = {}
_REGISTERING = Lock()


@cache
def _registry() -> dict[str, FormatSpec]:
    from .families import FAMILIES

    names: dict[str, FormatSpec] = {}
    for spec in FAMILIES:
        for name in (spec.name, *spec.aliases):
            names[name] = spec
    return names


def formats() -> list[str]:
    """Every accepted format name, aliases included (those registered at run time too)."""
    return sorted({**_registry(), **_REGISTERED})


def suffixed_formats() -> list[str]:
    """The formats whose markers carry a suffix (`FormatSpec.marker_suffix`), by name."""
    from .families import FAMILIES

    return [spec.name for spec in FAMILIES if spec.marker_suffix is not None]


def is_declared(spec: FormatSpec) -> bool:
    """Whether `spec` is one of the package's declared formats (not one registered or made at run time)."""
    return _registry().get(spec.name) is spec


def register_format(spec: FormatSpec, *, replace: bool = False) -> FormatSpec:
    """Make `spec` usable by its name and aliases wherever a format name is accepted (`parse`, `stream`,
    `StreamParser`, `grammar_for`, the OpenAI adapters, `parse_many`, the CLI run in this process).

    A name or alias of a declared format is always refused (a registered format never shadows one);
    one registered before is refused unless `replace=True`, which drops every name of the format it
    replaces. Returns `spec`."""
    if not isinstance(spec, FormatSpec):
        raise TypeError(f"register_format takes a streamparse.spec.FormatSpec, got {type(spec).__name__}")
    names = (spec.name, *spec.aliases)
    for name in names:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a format's name and aliases must be non-empty strings; got {name!r}")
    with _REGISTERING:
        for name in names:
            declared = _registry().get(name)
            if declared is not None:
                raise ValueError(f"{name!r} names the declared format {declared.name!r}; a registered format "
                                 "cannot replace a declared one: give it another name (dataclasses.replace(spec, "
                                 "name=..., aliases=()))")
            taken = _REGISTERED.get(name)
            if taken is not None and taken is not spec and not replace:
                raise ValueError(f"{name!r} is already registered (format {taken.name!r}); pass replace=True to "
                                 "replace it, or give the new format another name")
        for old in {id(_REGISTERED[n]): _REGISTERED[n] for n in names if n in _REGISTERED}.values():
            _drop(old)
        for name in names:
            _REGISTERED[name] = spec
        _forget_parsers()
    return spec


def unregister_format(name: str) -> None:
    """Forget the format registered at run time as `name` (all its names); `ValueError` if there is none."""
    with _REGISTERING:
        spec = _REGISTERED.get(name)
        if spec is None:
            raise ValueError(f"no format is registered at run time as {name!r}")
        _drop(spec)
        _forget_parsers()


def _drop(spec: FormatSpec) -> None:
    for name in [n for n, s in _REGISTERED.items() if s is spec]:
        del _REGISTERED[name]


def _forget_parsers() -> None:
    """A name may now mean another format: the options and parser states made for names are made again."""
    options = sys.modules.get(f"{__package__}.options")
    if options is not None:
        options._LAST_PLAIN[0] = None
    parser = sys.modules.get(f"{__package__}.engine.parser")
    if parser is not None:
        with parser._FIXED_LOCK:
            parser._FIXED.clear()


def get_format(format: str | FormatSpec, marker_suffix: str | None = None) -> FormatSpec:
    """The format called `format` (a name or alias, declared or registered), or `format` itself where it is
    a `FormatSpec`, with its markers spelled with `marker_suffix` where given; `ValueError` listing the
    known names otherwise."""
    if isinstance(format, FormatSpec):
        spec: FormatSpec | None = format
    elif isinstance(format, str):
        spec = _registry().get(format) or _REGISTERED.get(format)
    else:
        raise TypeError(f"format must be a format name (str) or a FormatSpec, got {type(format).__name__}")
    if spec is None:
        raise ValueError(f"unknown format {format!r}; known formats: {', '.join(formats())}")
    if marker_suffix is not None:
        check_suffix(marker_suffix)
        if spec.marker_suffix is None:
            raise ValueError(f"format {spec.name!r} spells its markers one way; marker_suffix applies to formats "
                             f"whose markers carry a suffix ({', '.join(suffixed_formats())})")
        return spec.marker_suffix.fill(marker_suffix)
    return spec
