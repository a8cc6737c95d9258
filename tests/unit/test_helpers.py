"""One helper per small concept (issue 33): the file hash, the name slug, the Markdown table and the walker over a
PyTerrier pipeline's stages, each checked against what its former copies produced."""

from __future__ import annotations

import hashlib

import pyterrier as pt

from irgrid.runner.transforms import latency_accounting, stages
from irgrid.store import file_digest
from irgrid.util.files import slug
from irgrid.util.hashing import file_sha256
from irgrid.util.markdown import markdown_table


def test_file_sha256_full_and_short_forms(tmp_path):
    path = tmp_path / "docs.jsonl"
    data = b"x" * (3 << 20) + b"tail"  # over one read block: the blocks are chained
    path.write_bytes(data)
    full = hashlib.sha256(data).hexdigest()
    assert file_sha256(path) == full == file_digest(path)  # the store's manifests (under FULL_HASH_BYTES)
    assert file_sha256(str(path), 16) == full[:16]  # the content key of local inputs and staged copies


def test_slug_names_folders_as_the_run_folders_always_were():
    assert slug("beir/scifact/test") == "beir--scifact--test"
    assert slug("vaswani") == "vaswani"
    from irgrid.data.datasets import get

    assert get("beir/scifact/test").slug == "beir--scifact--test"


def test_markdown_table_layouts():
    rows = [["bm25 (baseline)", "0.5|1"], ["two\nlines", "0.25"]]
    assert markdown_table(["system", "nDCG@10"], rows, "lr") == (
        "| system | nDCG@10 |\n|---|---:|\n| bm25 (baseline) | 0.5|1 |\n| two\nlines | 0.25 |")
    assert markdown_table(["system", "a|b"], rows, spaced=True, escape=True) == (
        "| system | a|b |\n| --- | --- |\n| bm25 (baseline) | 0.5\\|1 |\n| two lines | 0.25 |")
    assert markdown_table(["a", "b", "c"], [], "r", spaced=True) == "| a | b | c |\n| ---: | --- | --- |"


class _Timed(pt.Transformer):
    def __init__(self, seconds: float, inner: pt.Transformer | None = None):
        self.seconds = seconds
        self._inner = inner  # a wrapper, as runner.roles.FirstStage is: it says so through pt.inspect's protocol

    def transform(self, inp):
        return inp

    def latency_seconds(self) -> float:
        return self.seconds

    def subtransformers(self):
        return {"inner": self._inner} if self._inner is not None else {}


class _Plain(pt.Transformer):
    """A third-party wrapper without the protocol: PyTerrier finds `inner` from its constructor's signature."""

    def __init__(self, inner: pt.Transformer):
        self.inner = inner

    def transform(self, inp):
        return inp


def test_stages_walks_every_operator_once():
    a, b, c, d = _Timed(1), _Timed(2), _Timed(4), _Timed(8)
    wrapped = _Timed(16, inner=d)
    pipeline = (a >> b) + (c | wrapped) >> a  # Compose (_transformers), Sum and SetUnion (left/right), a wrapper
    found = stages(pipeline)
    assert all(any(s is t for s in found) for t in (a, b, c, d, wrapped))
    assert len({id(s) for s in found}) == len(found)  # `a` is used twice and listed once
    assert latency_accounting(pipeline)() == 31.0
    assert latency_accounting(a, b, a)() == 3.0  # several roots (an expression's parts), shared stages once
    assert latency_accounting(_Plain(_Timed(32)) >> b)() == 34.0  # pt.inspect's signature inference
