"""Entries extend the engine only through declared seams (issue 33): tiny architectures by `register_architecture`,
scorers as a field of the entry, wrapped entries resolved lazily (so entry modules import in any order), and
third-party entry packages found through the `irgrid.entries` entry points, with errors that name whose package
failed. The grid run of a third-party entry on real data: tests/system/test_third_party_entries.py."""

from __future__ import annotations

import ast
import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest
from support import BM25_PISA_K12, install_entry_package

import irgrid
from irgrid.core.retrievers import RETRIEVERS, get
from irgrid.models import tiny
from irgrid.runner import scoring
from irgrid.util.registry import DuplicateNameError, Registry, RegistryError

ROOT = Path(__file__).resolve().parents[2]


def _cli(env: dict[str, str] | None, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irgrid.cli", *args], capture_output=True, text=True, env=env,
                          timeout=120)


# -- tiny architectures ---------------------------------------------------------------------------------------------


def test_entries_declare_their_tiny_architectures():
    RETRIEVERS.names()  # loads the entries
    assert tiny.ARCHITECTURES["bert-mlm"] == (tiny.bert_config, "BertForMaskedLM")
    assert tiny.ARCHITECTURES["bert-token-regression"][1] == "BertForTokenClassification"
    assert tiny.ARCHITECTURES["qwen2-causal"][1] == "Qwen2ForCausalLM"
    assert tiny.ARCHITECTURES["t5"][1] == "T5ForConditionalGeneration"  # declared once, in irgrid.models.tiny


def test_register_architecture_refuses_a_taken_name():
    with pytest.raises(DuplicateNameError, match="'bert' is already declared") as e:
        tiny.register_architecture("bert", tiny.bert_config, "BertModel")
    assert isinstance(e.value, irgrid.Error)


def test_entries_import_no_private_name_and_no_registry_internals():
    """The seams are the only doors: no `_name` imported from irgrid, no ARCHITECTURES or scorer table edited."""
    for path in sorted((ROOT / "pipelines").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("irgrid"):
                private = [a.name for a in node.names if a.name.startswith("_")]
                assert not private, f"{path.name}: imports private {private} from {node.module}"
                assert not {"ARCHITECTURES", "register_scorer", "SCORERS"} & {a.name for a in node.names}, path.name


# -- scorers declared on the entry ----------------------------------------------------------------------------------


def test_rerankers_declare_their_scorer():
    ce = get("ce-ms-marco-minilm-l6-v2")
    assert ce.make_scorer is not None and ce.rerank_only
    assert scoring.can_score(ce) and scoring.rerank_only(ce)
    assert ce.query not in scoring.SCORERS  # the entry says it, no table above the entries is edited
    bm25, minilm, splade = get("bm25"), get("all-minilm-l6-v2"), get("splade-tiny")
    assert scoring.can_score(bm25) and not scoring.rerank_only(bm25)  # its own retrieval's scores (a BM25 feature)
    assert bm25.make_scorer is not None and bm25.query not in scoring.SCORERS
    assert not scoring.can_score(splade) and not scoring.rerank_only(splade)
    assert scoring.can_score(minilm) and not scoring.rerank_only(minilm)  # dense: declared by its entry too


def test_register_scorer_still_serves_users_own_query_builders():
    def my_query(index, ctx):  # a user's own entry, outside pipelines/
        raise AssertionError("not run")

    def my_scorer(entry, models, device, index=None):
        raise AssertionError("not run")

    from irgrid.core.retrievers import Retriever

    mine = Retriever(name="my-reranker", family="reranker", architecture="cross-encoder", query=my_query)
    assert not irgrid.can_score(mine)
    irgrid.register_scorer(my_query, my_scorer, rerank_only=True)
    try:
        assert irgrid.can_score(mine) and scoring.rerank_only(mine)
        assert scoring.scorer_factory(mine) is my_scorer
    finally:
        scoring.SCORERS.pop(my_query)
        scoring.RERANK_ONLY.discard(my_query)


# -- lazy entries: import order does not matter ---------------------------------------------------------------------


def test_lazy_item_keeps_its_place_and_resolves_on_lookup():
    made: list[str] = []
    reg: Registry[str] = Registry("thing")
    reg.register("a", "A")
    reg.register_lazy("b", lambda: made.append("b") or reg.get("c").lower())  # wraps "c", registered after it
    reg.register("c", "C")
    assert made == [] and "b" in reg and reg.names() == ["a", "b", "c"]
    assert reg.get("b") == "c" and made == ["b"]
    assert list(reg) == ["A", "c", "C"] and made == ["b"]  # made once
    with pytest.raises(DuplicateNameError):
        reg.register_lazy("a", lambda: "x")


def test_lazy_item_that_wraps_itself_or_makes_another_name_is_an_error():
    class Named:
        def __init__(self, name):
            self.name = name

    reg: Registry[Named] = Registry("retriever")
    reg.register_lazy("loop", lambda: reg.get("loop"))
    with pytest.raises(RegistryError, match="'loop' wraps itself"):
        reg.get("loop")
    reg.register_lazy("x", lambda: Named("y"))
    with pytest.raises(RegistryError, match="registered lazily but its factory made 'y'"):
        reg.get("x")


def test_entry_modules_import_in_any_order():
    """HyDE wraps `contriever` by name: imported before the dense entries (here: every module in reverse order,
    the package's own __init__ bypassed), it still resolves to the same entry with the same key."""
    code = f"""
import importlib, sys, types
pkg = types.ModuleType("irgrid.pipelines")
pkg.__path__ = [{str(ROOT / "pipelines")!r}]
sys.modules["irgrid.pipelines"] = pkg  # the entry modules alone, without the package's import list
for name in sorted({sorted(p.stem for p in (ROOT / "pipelines").glob("*.py") if p.stem != "__init__")!r},
                   reverse=True):
    importlib.import_module("irgrid.pipelines." + name)
from irgrid.core.retrievers import RETRIEVERS
print(sorted(RETRIEVERS.names()))
print(RETRIEVERS.get("hyde").key(), RETRIEVERS.get("hyde").with_options(encoder="all-minilm-l6-v2").key())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    names, keys = out.stdout.strip().splitlines()
    assert names == str(sorted(RETRIEVERS.names()))
    hyde = get("hyde", tiny=False)
    assert keys.split() == [hyde.key(), hyde.with_options(encoder="all-minilm-l6-v2").key()]


def test_an_entry_module_imports_alone():
    """expansion.py without the dense entries it may wrap: its import registers HyDE's name, resolving nothing."""
    code = f"""
import importlib, sys, types
pkg = types.ModuleType("irgrid.pipelines")
pkg.__path__ = [{str(ROOT / "pipelines")!r}]
sys.modules["irgrid.pipelines"] = pkg
importlib.import_module("irgrid.pipelines.expansion")
from irgrid.core.retrievers import RETRIEVERS
print(" ".join(RETRIEVERS.names()))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["bm25", "bm25-pisa", "bm25-lucene-pisa", "doct5query", "query2doc", "hyde"]


# -- third-party entry packages (entry points) ----------------------------------------------------------------------


def test_third_party_entry_is_listed_after_irgrids_own(tmp_path):
    env = install_entry_package(tmp_path / "site", "irgrid-bm25-variants", "irgrid_bm25_variants", BM25_PISA_K12)
    plain = _cli(None, "list", "--format", "csv")
    added = _cli(env, "list", "--format", "csv")
    assert plain.returncode == 0 and added.returncode == 0, added.stderr
    rows = list(csv.DictReader(io.StringIO(added.stdout)))
    mine = next(r for r in rows if r["name"] == "bm25-pisa-k1.2")
    assert mine["family"] == "sparse"
    assert [r for r in rows if r["name"] != "bm25-pisa-k1.2"] == list(csv.DictReader(io.StringIO(plain.stdout)))
    code = ("from irgrid.core.retrievers import get; a = get('bm25-pisa-k1.2'); "
            "print(a.key() == get('bm25-pisa').with_options(k1=1.2).key())")
    same = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert same.stdout.strip() == "True", same.stderr  # the entry is bm25-pisa at k1=1.2: one key, one cache


def test_third_party_packages_load_in_a_fixed_order(tmp_path):
    site = tmp_path / "site"
    for dist, k1 in (("zz-entries", "1.5"), ("aa-entries", "1.1")):
        module = dist.replace("-", "_")
        source = BM25_PISA_K12.replace("bm25-pisa-k1.2", f"bm25-pisa-k{k1}").replace('"k1": 1.2', f'"k1": {k1}')
        env = install_entry_package(site, dist, module, source)
    code = "from irgrid.core.retrievers import RETRIEVERS; print(' '.join(RETRIEVERS.names()))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    names = out.stdout.split()
    assert names[:-2] == RETRIEVERS.names()  # irgrid's own first, in their order
    assert names[-2:] == ["bm25-pisa-k1.1", "bm25-pisa-k1.5"]  # then by distribution: aa-entries, zz-entries


def test_a_broken_entry_package_names_its_distribution_and_module(tmp_path):
    env = install_entry_package(tmp_path / "site", "broken-entries", "broken_entries",
                                "import a_module_that_is_not_installed\n")
    out = _cli(env, "list")
    assert out.returncode != 0
    message = out.stderr
    assert "'broken_entries'" in message and "'broken-entries'" in message and "irgrid.entries" in message
    assert "ModuleNotFoundError" in message and "pip uninstall broken-entries" in message
    assert "Traceback" not in message


def test_an_entry_package_that_takes_a_name_is_refused(tmp_path):
    env = install_entry_package(tmp_path / "site", "clash-entries", "clash_entries",
                                BM25_PISA_K12.replace('name="bm25-pisa-k1.2"', 'name="bm25"'))
    out = _cli(env, "list")
    assert out.returncode != 0
    assert "'clash_entries'" in out.stderr and "'clash-entries'" in out.stderr
    assert "retriever 'bm25' is already registered" in out.stderr and "Traceback" not in out.stderr
