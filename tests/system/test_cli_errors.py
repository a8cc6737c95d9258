"""`irgrid run` on bad input, as a subprocess: one clear `irgrid: error:` line, exit status 2, nothing written."""

from __future__ import annotations

import subprocess
import sys

GOOD = """\
name: t
datasets: [vaswani]
retrievers: [bm25-pisa]
measures: [AP]
"""


def _cli_run(tmp_path, text: str) -> subprocess.CompletedProcess:
    exp = tmp_path / "exp.yaml"
    exp.write_text(text)
    return subprocess.run([sys.executable, "-m", "irgrid.cli", "run", str(exp), "--out", str(tmp_path / "out"),
                           "--cache", str(tmp_path / "cache")], capture_output=True, text=True, timeout=300)


def _one_error(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == 2, proc.stderr[-2000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("irgrid: error:")]
    assert len(errors) == 1 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    return errors[0]


def test_unknown_retriever(tmp_path):
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("bm25-pisa", "bm25-psia")))
    assert "retrievers[0]" in msg and "unknown retriever 'bm25-psia'" in msg and "Did you mean 'bm25-pisa'" in msg
    assert "exp.yaml" in msg
    assert not (tmp_path / "out").exists() and not (tmp_path / "cache").exists()


def test_unknown_dataset(tmp_path):
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("vaswani", "vaswanni")))
    assert "datasets[0]" in msg and "Did you mean 'vaswani'" in msg


def test_malformed_yaml_names_the_line(tmp_path):
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("retrievers: [bm25-pisa]", "retrievers: [bm25-pisa")))
    assert "not valid YAML" in msg and "line" in msg



# -- issue 32: tracebacks that became one error line ------------------------------------------------------------
def test_huge_fusion_expression_and_bad_weights_are_one_line(tmp_path):
    terms = " + ".join(["bm25-pisa"] * 3000)
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("retrievers: [bm25-pisa]",
                                                     f'retrievers: [bm25-pisa, {{as: f, pipeline: "{terms}"}}]')))
    assert "3000 pipeline names in one expression; at most 200" in msg and len(msg) < 400
    msg = _one_error(_cli_run(tmp_path, GOOD.replace("retrievers: [bm25-pisa]",
                                                     'retrievers: [bm25-pisa, {as: f, pipeline: "1e999 * bm25-pisa"}]')))
    assert "weight 1e309 is outside (0, 1e+06]" in msg  # 1e999 is inf: Python writes it 1e309


def _qa_replay(tmp_path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "irgrid.cli", "qa", "replay", *args, "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=300)


def test_qa_replay_bad_sample_and_truncated_file_are_one_line(tmp_path):
    for sample in ("0", "-1"):
        msg = _one_error(_qa_replay(tmp_path, str(tmp_path / "any.csv.gz"), "--sample", sample))
        assert f"--sample {sample}: the number of questions to sample must be a whole number >= 1" in msg
    import gzip

    cut = tmp_path / "cut.jsonl.gz"
    whole = gzip.compress("".join(f'{{"model": "m{i}", "setting": "base", "item": {i * 7919 % 10007}}}\n'
                                  for i in range(5000)).encode())
    cut.write_bytes(whole[: len(whole) // 2])  # cut mid-stream
    msg = _one_error(_qa_replay(tmp_path, str(cut)))
    assert f"{cut}: cannot be read (truncated or damaged?)" in msg


def test_out_folder_with_foreign_results_is_refused(tmp_path):
    """Issue 40 item 4: a results.csv irgrid did not write (no irgrid manifest beside it) is never overwritten,
    as `irgrid report` already refuses such a folder; nothing is computed first."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "results.csv").write_text("mine,not irgrid's\n1,2\n")
    msg = _one_error(_cli_run(tmp_path, GOOD))
    assert f"--out {out} holds results.csv but no manifest.json" in msg and "does not overwrite" in msg
    assert (out / "results.csv").read_text() == "mine,not irgrid's\n1,2\n"
    assert not (tmp_path / "cache").exists()
    (out / "manifest.json").write_text('{"name": "someone else\'s"}')
    msg = _one_error(_cli_run(tmp_path, GOOD))
    assert "a manifest.json that is not irgrid's" in msg and "Choose another --out" in msg
    assert (out / "results.csv").read_text() == "mine,not irgrid's\n1,2\n"


def test_dry_run_names_a_missing_model_mapping_file(tmp_path):
    """Issue 40 item 10: IRGRID_MODELS naming no file is said as such, not as an installed model gone missing."""
    import os

    exp = tmp_path / "exp.yaml"
    exp.write_text(GOOD.replace("bm25-pisa", "all-minilm-l6-v2"))
    env = {**os.environ, "IRGRID_MODELS": str(tmp_path / "absent.yaml")}
    proc = subprocess.run([sys.executable, "-m", "irgrid.cli", "run", str(exp), "--dry-run", "--cache",
                           str(tmp_path / "cache")], capture_output=True, text=True, timeout=300, env=env)
    msg = _one_error(proc)
    assert "absent.yaml, which does not exist: the model mapping file is missing" in msg
    assert "missing checkpoints" not in proc.stdout
