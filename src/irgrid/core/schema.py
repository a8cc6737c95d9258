"""One declarative check for the mappings that irgrid's YAML files hold (experiments, bring-your-own collections,
the cluster config, expected scores): which keys are required or optional and of which type, unknown keys named
with a "did you mean", and every error naming the file (and entry) and the key. Each reader keeps its own
exception type and checks the meaning of the values (names, ranges) itself."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from irgrid.util.errors import Error
from irgrid.util.registry import did_you_mean

NUMBER = (int, float)  # a YAML number (booleans are refused wherever a number or whole number is asked for)


class SchemaError(Error, ValueError):
    pass


@dataclass(frozen=True)
class Key:
    """One key of a mapping: its type(s) (`object`: any), required (absent or null is "missing"), and for a given
    value whether it must be non-empty. `hint` says in words what the value must be, for the error."""

    types: type | tuple[type, ...] = object
    required: bool = False
    nonempty: bool = False
    hint: str = ""

    def accepts(self, value: Any) -> bool:
        types = self.types if isinstance(self.types, tuple) else (self.types,)
        if isinstance(value, bool) and bool not in types and object not in types:
            return False  # YAML's true/false are no numbers here
        return isinstance(value, types) and not (self.nonempty and not value)

    def describe(self) -> str:
        if self.hint:
            return self.hint
        types = set(self.types) if isinstance(self.types, tuple) else {self.types}
        words = "number" if types == set(NUMBER) else " or ".join(sorted(_WORDS.get(t, t.__name__) for t in types))
        return f"a non-empty {words}" if self.nonempty else f"a {words}"


_WORDS = {dict: "mapping", list: "list", str: "string", int: "whole number", float: "number", bool: "true/false",
          object: "value"}


@dataclass(frozen=True)
class Schema:
    keys: Mapping[str, Key]
    missing_hint: str = ""  # appended to "missing [...]", e.g. what an entry always needs

    def check(self, data: Any, where: str, error: type[Exception] = SchemaError) -> dict[str, Any]:
        """`data` itself when it fits; otherwise one `error` that starts with `where` (file, entry)."""
        if not isinstance(data, dict):
            raise error(f"{where}: expected a mapping with keys {sorted(self.keys)}, got {type(data).__name__}")
        unknown = sorted(str(k) for k in set(data) - set(self.keys))
        if unknown:
            hints = [(k, did_you_mean(k, sorted(self.keys))) for k in unknown]
            hint = "".join(h if len(unknown) == 1 else f" {k!r}:{h}" for k, h in hints if h)
            raise error(f"{where}: unknown key(s) {unknown}; allowed: {sorted(self.keys)}.{hint}")
        missing = [k for k, key in self.keys.items() if key.required and data.get(k) in (None, "")]
        if missing:
            raise error(f"{where}: missing {missing}" + (f" ({self.missing_hint})" if self.missing_hint else ""))
        for name, key in self.keys.items():
            value = data.get(name)
            if name in data and (value is not None or key.nonempty) and not key.accepts(value):
                shown = repr(value) if len(repr(value)) <= 80 else repr(value)[:77] + "..."
                raise error(f"{where}: '{name}' must be {key.describe()}; got {shown}")
        return data
