"""schema_typing's depth check: exact at any limit, whatever the value's strings hold.

`deeper_than` proves most values shallow from their text (brackets outside strings, found after
the escapes are paired as a JSON reader pairs them) and walks the others; both must agree with the
depth of the decoded value, for any JSON text the strict decoder reads."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from streamparse.grammar import strict_loads
from streamparse.schema_typing import _nesting_at_most, deeper_than

# Strings full of what could mislead a reading of the text: brackets, quotes, backslashes (escaped
# by json.dumps as \\ and \"), and characters json.dumps may write as \u escapes.
_TRICKY = st.text(alphabet=st.sampled_from(list('[]{}"\\ ,:x\n\u00e9\u005b\U0001f600')), max_size=6)
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _TRICKY)


def _values(leaves: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.recursive(leaves, lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(_TRICKY, inner, max_size=3)), max_leaves=12)


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def _wrapped(value: Any, levels: int, key: str) -> Any:
    for level in range(levels):
        value = [key, value] if level % 2 else {key: value, "s": key}
    return value


@given(value=_values(_SCALARS), levels=st.integers(0, 45), key=_TRICKY, ascii_only=st.booleans(),
       spaced=st.booleans(), limit=st.integers(0, 50))
def test_the_depth_check_is_exact(value: Any, levels: int, key: str, ascii_only: bool, spaced: bool,
                                  limit: int) -> None:
    value = _wrapped(value, levels, key)
    separators = (", ", ": ") if spaced else (",", ":")
    text = json.dumps(value, ensure_ascii=ascii_only, separators=separators)
    decoded = strict_loads(text)
    depth = _depth(decoded)
    assert deeper_than(decoded, limit, text) == (depth > limit)
    assert _nesting_at_most(text, limit) == (depth <= limit)


def test_escapes_pair_as_a_json_reader_pairs_them() -> None:
    # `\\` then `"` closes the string; `\"` does not; a `[` inside a string is no bracket.
    assert _nesting_at_most('["a\\\\", ["b"]]', 2) and not _nesting_at_most('["a\\\\", ["b"]]', 1)
    assert _nesting_at_most('["a\\"]]]", ["b"]]', 2) and not _nesting_at_most('["a\\"[[[", [[]]]', 2)
    assert _nesting_at_most('{"k\\\\\\"[": [[]], "v": "]]"}', 3)
    assert not _nesting_at_most('{"k\\\\\\"[": [[]], "v": "]]"}', 2)
