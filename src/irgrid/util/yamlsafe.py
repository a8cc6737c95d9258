"""Loading experiment YAML defensively: a size cap, no aliases, no duplicate keys, text only.

PyYAML's `safe_load` still expands aliases (a 513-byte "billion laughs" file took 1.6 GB) and lets a repeated
key silently win; neither is ever useful in a data-only experiment file, so both are refused with the file and
line. PyYAML has no switch for either, hence this small loader subclass.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from irgrid.util.errors import Error

MAX_BYTES = 1 << 20  # 1 MiB: the paper's full grid is 4 KiB; IRGRID_MAX_EXPERIMENT_BYTES raises it


class YamlError(Error, ValueError):
    pass


class _NoDuplicateKeys:
    def construct_mapping(self, node, deep=False):  # type: ignore[no-untyped-def]
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)  # type: ignore[attr-defined]
            try:
                hash(key)
            except TypeError:
                continue  # PyYAML itself reports unhashable keys
            line = key_node.start_mark.line + 1
            if key in seen:
                raise YamlError(f"line {line}: key {key!r} appears twice in one mapping (first on line {seen[key]}); "
                                f"keep one")
            seen[key] = line
        return super().construct_mapping(node, deep=deep)  # type: ignore[misc]


class _StrictLoader(_NoDuplicateKeys, yaml.SafeLoader):
    def compose_node(self, parent, index):  # type: ignore[override]
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise YamlError(_alias_message(event))
        return super().compose_node(parent, index)


def _alias_message(event: Any) -> str:
    return (f"line {event.start_mark.line + 1}: YAML aliases (*{event.anchor}) are not allowed in experiment files; "
            f"write the value out")


# libyaml's parser when PyYAML was built with it: a 1 MiB experiment (18,000 variants) took minutes to read with
# the pure-Python one. Its composer is C (no hook), so aliases are refused from a first pass over its events.
_FastLoader: Any = None
if getattr(yaml, "__with_libyaml__", False):
    class _FastLoader(_NoDuplicateKeys, yaml.CSafeLoader):  # type: ignore[no-redef]
        pass


def _strict_load(text: str) -> Any:
    if _FastLoader is None:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)
    for event in yaml.parse(text, Loader=yaml.CSafeLoader):
        if isinstance(event, yaml.AliasEvent):
            raise YamlError(_alias_message(event))
    return yaml.load(text, Loader=_FastLoader)  # noqa: S506 (a CSafeLoader subclass)


def load_text(text: str) -> Any:
    """A YAML document held in memory (e.g. the experiment file a manifest recorded), under the same rules as
    `load_file`; errors are YamlError or yaml.YAMLError."""
    return _strict_load(text)


def max_bytes() -> int:
    from irgrid.util import settings

    value = settings.variable("IRGRID_MAX_EXPERIMENT_BYTES")
    return int(value) if value and value.isdigit() else MAX_BYTES


def load_file(path: str | Path) -> Any:
    """The YAML document of `path`; every error is a YamlError that starts with the path."""
    path = Path(path)
    size = path.stat().st_size
    limit = max_bytes()
    if size > limit:
        raise YamlError(f"{path}: {size / 2**20:.1f} MiB is larger than the {limit / 2**20:.1f} MiB allowed for an "
                        f"irgrid YAML file (IRGRID_MAX_EXPERIMENT_BYTES raises the limit)")
    raw = path.read_bytes()
    if b"\0" in raw:
        raise YamlError(f"{path}: a binary file, not a YAML file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise YamlError(f"{path}: not UTF-8 text (byte {e.start}); save it as UTF-8") from None
    try:
        return _strict_load(text)
    except YamlError as e:
        raise YamlError(f"{path}, {e}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise YamlError(f"{path}{at}: not valid YAML: {getattr(e, 'problem', e)}") from None


def read_yaml(path: str | Path, error: type[Exception]) -> Any:
    """`load_file` for a reader with its own exception type (cluster config, expected scores, QA experiments):
    the same size cap, no aliases, no duplicate keys, and line numbers in its errors."""
    try:
        return load_file(path)
    except YamlError as e:
        raise error(str(e)) from None
