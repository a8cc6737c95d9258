"""Closed sets of names as enums whose members are the strings themselves: YAML values, JSON, messages and
printed forms stay the plain names (`Family.DENSE == "dense"`, `f"{Family.DENSE}"` is `dense`), while the set
is one declaration with members to import instead of string literals to mistype."""

from __future__ import annotations

from enum import Enum


class NameEnum(str, Enum):
    """A str-valued enum printed, formatted and repr'd as its value (Python 3.10's `str, Enum` mix-in would
    print `Family.DENSE`; 3.11's StrEnum still repr's the member)."""

    __str__ = str.__str__
    __format__ = str.__format__
    __repr__ = str.__repr__

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The values, in declaration order (for messages and "did you mean")."""
        return tuple(m.value for m in cls)
