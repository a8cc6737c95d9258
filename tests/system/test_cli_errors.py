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

