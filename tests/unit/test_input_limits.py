"""Bad experiment and collection files are refused quickly with the key, file and line named (no data read)."""

from __future__ import annotations

import pytest
from support import experiment_yaml

from irgrid.runner.experiment import ExperimentError, from_dict, load


# -- 12. YAML: aliases refused, size capped, duplicate keys refused --------------------------------------------
def test_yaml_alias_bomb_is_refused_quickly(tmp_path):
    lines = ["name: bomb", 'a: &a ["x","x","x","x","x","x","x","x","x"]']
    for i in range(1, 9):
        lines.append(f"{chr(97 + i)}: &{chr(97 + i)} [" + ",".join([f"*{chr(96 + i)}"] * 9) + "]")
    (tmp_path / "bomb.yaml").write_text("\n".join(lines) + "\n")
    with pytest.raises(ExperimentError, match=r"bomb.yaml.*alias"):
        load(tmp_path / "bomb.yaml")


def test_huge_experiment_file_is_refused(tmp_path):
    path = tmp_path / "huge.yaml"
    path.write_text("name: huge\ndatasets: [vaswani]\nretrievers:\n" + "  - bm25-pisa\n" * 200_000)
    with pytest.raises(ExperimentError, match=r"huge.yaml.*MiB"):
        load(path)


def test_duplicate_yaml_keys_are_refused(tmp_path):
    path = tmp_path / "dup.yaml"
    path.write_text("name: d\ndatasets: [vaswani]\nretrievers: [bm25-pisa]\nmeasures: [AP]\nmeasures: [nDCG@10]\n")
    with pytest.raises(ExperimentError, match=r"dup.yaml.*line 5.*'measures'.*twice"):
        load(path)


# -- inputs validated at the edge: each error names the file, the entry and the key -----------------------------
@pytest.mark.parametrize("patch, expected", [
    ({"retrievers": [{"name": "bm25-pisa", "options": {"k1": "abc"}}]}, "retrievers[0] (bm25-pisa): option k1: expected a number"),
    ({"retrievers": [{"name": "bm25-pisa", "options": {"num_results": -5}}]}, "option num_results: -5 is outside"),
    ({"datasets": ["vaswani", "vaswani"]}, "datasets[1]: 'vaswani' is already datasets[0]"),
    ({"datasets": [{"name": "vaswani", "queries": 0}]}, "queries: 0 selects no query"),
])
def test_option_and_dataset_errors_name_the_key(patch, expected):
    with pytest.raises(ExperimentError) as e:
        from_dict({"datasets": ["vaswani"], "retrievers": ["bm25-pisa"], "measures": ["AP"], **patch}, source="x.yaml")
    assert expected in str(e.value) and str(e.value).startswith("x.yaml")


@pytest.mark.parametrize("role, content, expected", [
    ("topics", "q1\tfirst\nq1\tagain\n", "line 2: query id 'q1' already on line 1"),
    ("topics", "", "topics file is empty"),
    ("topics", "q1\tone\ttwo\n", "line 1: expected 'qid<TAB>query text', got 3"),
    ("qrels", "q1 D1 1\n", "line 1: expected 4 columns"),
    ("qrels", "q1 0 D1 yes\n", "line 1: relevance label 'yes' is not a whole number"),
    ("docs", "D1\tt\tx\nD1\tt\ty\n", "document id 'D1' appears twice"),
    ("docs", b"D1\tt\t\xff\xfe\n", "not UTF-8"),
])
def test_malformed_collection_files_name_file_and_line(tmp_path, role, content, expected):
    data = tmp_path / "data"
    data.mkdir()
    files = {"docs": "D1\tt\tx\n", "topics": "q1\tfirst\n", "qrels": "q1 0 D1 1\n"}
    files[role] = content
    for r, name in (("docs", "docs.tsv"), ("topics", "topics.tsv"), ("qrels", "qrels.txt")):
        body = files[r]
        (data / name).write_bytes(body if isinstance(body, bytes) else body.encode())
    with pytest.raises(ExperimentError) as e:
        load(experiment_yaml(tmp_path, name=f"bad-{role}-{abs(hash(str(content))) % 10**6}"))
    msg = str(e.value)
    assert expected in msg and "collections[0]" in msg, msg


# -- TREC topics (issue 32): a file cut mid-topic is refused, <title>-only topics are read -------------------------
def _trec(qids, title_only: bool = False) -> str:
    extra = "" if title_only else "<desc> Description:\nabout it\n\n<narr> Narrative:\nrelevant if so\n\n"
    return "".join(f"<top>\n<num> Number: {q}\n<title> query {q}\n\n{extra}</top>\n\n" for q in qids)


def _trec_collection(tmp_path, topics: str, name: str):
    data = tmp_path / "data"
    data.mkdir(exist_ok=True)
    (data / "docs.tsv").write_text("D1\tt\tquery one\nD2\tt\tquery two\n")
    (data / "topics.trec").write_text(topics)
    (data / "qrels.txt").write_text("".join(f"{q} 0 D1 1\n" for q in ("1", "2", "3")))
    exp = experiment_yaml(tmp_path, name=name)
    exp.write_text(exp.read_text().replace("topics.tsv", "topics.trec"))
    return load(exp)


def test_trec_topics_cut_mid_topic_are_refused_with_the_line(tmp_path):
    text = _trec(["1", "2", "3"])
    cut = text[: text.index("<title> query 3") + 9]  # the last topic loses its end
    with pytest.raises(ExperimentError, match=r"topics.trec: the topic opened on line 25 has no </top> "
                                              r"\(the file is cut mid-topic\?\)"):
        _trec_collection(tmp_path, cut, "trec-cut")


def test_title_only_trec_topics_are_read(tmp_path, caplog):
    from irgrid.data import byo, formats
    from irgrid.util.hashing import file_sha256

    with pytest.raises(ExperimentError, match="no <num>"):  # the files in place (the collection is refused)
        _trec_collection(tmp_path, "<top>\n<title> x\n</top>\n", "trec-title-only")
    data = tmp_path / "data"
    (data / "topics.trec").write_text(_trec(["1", "2"], title_only=True))
    paths = {role: data / name for role, name in (("docs", "docs.tsv"), ("topics", "topics.trec"),
                                                  ("qrels", "qrels.txt"))}
    # load()'s own checks, without its last step (which opens ir_datasets: the integration tier's)
    hashes = {r: file_sha256(p, 16) for r, p in paths.items()}
    with pytest.raises(byo.CollectionError, match=r"1 of 3 query ids judged in .*qrels.txt are not in .*topics.trec"):
        byo._validate(paths, "tsv", "trec", hashes, "collections[0]")  # qrels judge query 3, the topics stop at 2
    byo._validate(paths, "tsv", "trec", hashes, "collections[0]", allow_unjudged_qrels=True)
    topics = list(formats.VerifiedTrecQueries(data / "topics.trec", None).queries_iter())
    assert [(q.query_id, q.title, q.description) for q in topics] == [("1", "query 1", ""), ("2", "query 2", "")]
    assert "1 of 3 query ids judged in" in caplog.text and "ignored (allow_unjudged_qrels: true)" in caplog.text


@pytest.mark.parametrize("topics, expected", [
    ("<top>\n<title> no number\n</top>\n", "topic of line 1: no <num>"),
    ("<top>\n<num> Number: 1\n<title> a\n<top>\n", "line 4: <top> before the topic of line 1 was closed"),
    (_trec(["1"]) + _trec(["1"]), "query id '1' already on line 1"),
])
def test_malformed_trec_topics_name_the_line(tmp_path, topics, expected):
    with pytest.raises(ExperimentError, match=expected):
        _trec_collection(tmp_path, topics, f"trec-bad-{abs(hash(topics)) % 10**6}")


def test_a_big_experiment_is_read_with_libyaml_and_stays_strict(tmp_path):
    """A 1 MiB file of 18,000 variants took minutes with PyYAML's pure-Python parser (issue 32): libyaml reads it
    where PyYAML has it, with aliases and repeated keys still refused."""
    import yaml

    from irgrid.util import yamlsafe

    assert (yamlsafe._FastLoader is not None) == bool(yaml.__with_libyaml__)
    path = tmp_path / "many.yaml"
    path.write_text("name: many\ndatasets: [vaswani]\nmeasures: [AP]\nretrievers:\n" + "".join(
        f"  - {{name: bm25-pisa, as: b{i}, options: {{k1: {0.5 + i / 1e4}}}}}\n" for i in range(3000)))
    spec = load(path)
    assert len(spec.retrievers) == 3000 and spec.retrievers[2999].name == "b2999"
    path.write_text(path.read_text() + "  - {name: bm25-pisa, as: b7}\n")
    with pytest.raises(ExperimentError, match=r"\['b7'\] appear twice"):
        load(path)
