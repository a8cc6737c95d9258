"""Strict checkpoint loading: a checkpoint whose parameters do not match the class it is loaded into is an error.

`from_pretrained` only warns about missing or unexpected parameters and initialises the missing ones at random,
so a renamed head or a wrong architecture would silently produce random vectors (and tiny random models cannot
catch it). Every loader in irgrid goes through `from_pretrained_strict`. transformers has no strict switch for
this (its `output_loading_info` only reports), hence this small wrapper.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from typing import Any

from irgrid.util.errors import Error


class CheckpointMismatchError(Error, RuntimeError):
    """Parameters missing from, or unexpected in, a checkpoint."""


def check_loading_info(info: dict[str, Any], what: str, allow_missing: Iterable[str] = (),
                       allow_unexpected: Iterable[str] = ()) -> None:
    """Raise if `info` (transformers' loading info) names parameters not covered by the allowed glob patterns.

    `allow_*` are declared by the entry that knows why (e.g. a pooler the entry never uses)."""
    allow_missing, allow_unexpected = tuple(allow_missing), tuple(allow_unexpected)

    def bad(keys: Iterable[Any], allowed: tuple[str, ...]) -> list[str]:
        names = [k if isinstance(k, str) else str(k[0]) for k in keys or ()]
        return sorted(n for n in names if not any(fnmatch.fnmatchcase(n, p) for p in allowed))

    missing = bad(info.get("missing_keys"), allow_missing)
    unexpected = bad(info.get("unexpected_keys"), allow_unexpected)
    mismatched = bad(info.get("mismatched_keys"), ())
    if not (missing or unexpected or mismatched):
        return
    parts = []
    for label, keys in (("missing (would be random)", missing), ("unexpected (ignored)", unexpected),
                        ("of another shape", mismatched)):
        if keys:
            parts.append(f"{len(keys)} {label}: {', '.join(keys[:8])}{' ...' if len(keys) > 8 else ''}")
    raise CheckpointMismatchError(
        f"{what}: the checkpoint does not match the model class it is loaded into — " + "; ".join(parts)
        + ". Check the entry's checkpoint id and loader (a wrong id or head), or declare parameters the entry "
        "knowingly leaves unused (allow_missing / allow_unexpected)."
    )


def from_pretrained_strict(cls: Any, location: str, what: str | None = None, allow_missing: Iterable[str] = (),
                           allow_unexpected: Iterable[str] = (), **kwargs: Any) -> Any:
    """`cls.from_pretrained(location, **kwargs)` that fails on missing, unexpected or mis-shaped parameters."""
    model, info = cls.from_pretrained(location, output_loading_info=True, **kwargs)
    check_loading_info(info, what or f"{getattr(cls, '__name__', cls)} from {location}", allow_missing,
                       allow_unexpected)
    return model
