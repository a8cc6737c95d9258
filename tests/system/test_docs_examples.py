"""Every YAML and Python example of the docs (docs/*.md) and the README is executed, as a user would copy it.

Per page, in one fresh working folder (with `experiments/` linked in): blocks marked `<!-- file: NAME -->` are
written there first; the page's Python blocks then run in order as one script (a subprocess, as a user's
script); then every YAML block is read by the reader for its kind (experiment, cluster config, expected scores, QA
experiment), which checks the schema, names, options and files. A YAML block that starts with
`# experiments/NAME.yaml` must equal that file unless it says `(abridged)`. `<!-- not-executed: REASON -->`
exempts a fragment. Examples are kept cheap (a tiny collection, vaswani with PISA), so heavy grids are validated,
not run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from irgrid.util import settings

ROOT = Path(__file__).resolve().parents[2]
PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
FENCE = re.compile(r"^([ \t]*)```(\w+)[^\n]*\n(.*?)^[ \t]*```[ \t]*$", re.S | re.M)  # fences in lists are indented
MARK = re.compile(r"<!--\s*(file|not-executed):\s*(.*?)\s*-->\s*$")
# pages whose Python examples read a staged collection (vaswani); the others need nothing staged
NEEDS_STAGED = {"composing.md"}


@dataclass
class Block:
    lang: str
    code: str
    line: int
    file: str | None = None
    skip: str | None = None


def blocks(page: Path) -> list[Block]:
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        if m.group(2) not in ("yaml", "python"):
            continue
        before = text[:m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        mark = MARK.search(before)
        block = Block(m.group(2), textwrap.dedent(m.group(3)), text[:m.start()].count("\n") + 1)
        if mark and mark.group(1) == "file":
            block.file = mark.group(2)
        elif mark:
            block.skip = mark.group(2)
        out.append(block)
    return out


def _kind(data: dict) -> str:
    if set(data) <= {"executor", "shards", "slurm", "ray"}:
        return "cluster"
    if "expected" in data:
        return "expected"
    if "readers" in data:
        return "qa"
    return "experiment"


def _validate(path: Path, kind: str) -> None:
    """Read the file with the reader irgrid reads such a file with (each raises on anything wrong)."""
    if kind == "cluster":
        from irgrid.cluster.config import ExecutorConfig

        ExecutorConfig.load(path)
    elif kind == "expected":
        from irgrid.report.check import load_expected

        load_expected(path)
    elif kind == "qa":
        from irgrid.qa.grid import load

        load(path)
    else:
        from irgrid.runner.experiment import load

        spec = load(path)
        assert spec.retrievers and spec.datasets


def test_every_example_is_run_or_says_why_not():
    """The not-executed escape hatch stays rare and explained, and every page's examples parse."""
    skipped = []
    for page in PAGES:
        fences = len(re.findall(r"^[ \t]*```(?:yaml|python)\b", page.read_text(), re.M))
        assert len(blocks(page)) == fences, f"{page.name}: a yaml/python fence the extractor does not see"
        for b in blocks(page):
            if b.skip is not None:
                assert len(b.skip) >= 10, f"{page.name}:{b.line}: say why the block is not executed"
                skipped.append(f"{page.name}:{b.line}")
            elif b.lang == "yaml":
                assert isinstance(yaml.safe_load(b.code), dict), f"{page.name}:{b.line}: not a YAML mapping"
            else:
                compile(b.code, f"{page.name}:{b.line}", "exec")
    assert len(skipped) <= 3, f"too many examples exempted from execution: {skipped}"


EXAMPLE_PAGES = [p for p in PAGES if any(b.skip is None for b in blocks(p))]


@pytest.mark.slow
@pytest.mark.parametrize("page", EXAMPLE_PAGES, ids=lambda p: p.name)
def test_page_examples_run(page: Path, tmp_path: Path):
    if page.name in NEEDS_STAGED and settings.staged_irds_home() is None:
        pytest.skip("vaswani is not staged: set IRGRID_IRDS_STAGED (or IRGRID_SHARED)")
    (tmp_path / "experiments").symlink_to(ROOT / "experiments")
    todo = [b for b in blocks(page) if b.skip is None]
    for b in todo:
        if b.file:
            (tmp_path / b.file).write_text(b.code)
    script = "\n".join(b.code for b in todo if b.lang == "python")
    if script:
        env = {**os.environ, "PYTHONPATH": ""}  # the installed irgrid, as a user has it
        done = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{page.name}: Python examples failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"
    for i, b in enumerate(x for x in todo if x.lang == "yaml"):
        data = yaml.safe_load(b.code)
        first = b.code.lstrip().split("\n", 1)[0]
        named = re.match(r"#\s*(experiments/[\w.-]+\.yaml)(.*)", first)
        if named and "abridged" not in named.group(2):
            assert data == yaml.safe_load((ROOT / named.group(1)).read_text()), \
                f"{page.name}:{b.line}: differs from {named.group(1)}; copy the file or say (abridged)"
        path = tmp_path / (b.file or f"example-{i}.yaml")
        path.write_text(b.code)
        try:
            _validate(path, _kind(data))
        except Exception as e:  # noqa: BLE001  (the message says which block)
            raise AssertionError(f"{page.name}:{b.line}: the {_kind(data)} example does not load: {e}") from e
