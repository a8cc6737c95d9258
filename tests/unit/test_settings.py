"""Settings are one value built once from the environment and the CLI's flags (`Settings.from_env`), checked there
(an error names the variable or flag and the fix), and made current for a block (`settings.using`): the CLI never
edits `os.environ`, and what it was given is what the commands read."""

from __future__ import annotations

from pathlib import Path

import pytest

from irgrid.util import settings
from irgrid.util.settings import Settings, SettingsError


def test_from_env_reads_every_setting_and_flags_win(tmp_path):
    env = {"IRGRID_CACHE": str(tmp_path / "c"), "IRGRID_IRDS_STAGED": str(tmp_path / "staged"),
           "IRGRID_DEVICE": "cuda:1", "IRGRID_MAX_MODELS": "5", "IRGRID_SHARED": str(tmp_path / "shared"),
           "IRGRID_TINY_MODELS": "yes", "IRGRID_VERBOSE": "0", "HF_HUB_OFFLINE": "1", "IRGRID_MODELS": "m.yaml",
           "OMP_NUM_THREADS": "2", "HOME": "/nowhere", "OPENAI_API_KEY": "sk-not-passed"}
    s = Settings.from_env(env)
    assert (s.cache, s.irds_staged, s.device, s.max_models, s.shared, s.tiny_models, s.verbose) == (
        tmp_path / "c", tmp_path / "staged", "cuda:1", 5, tmp_path / "shared", True, False)
    assert s.irds_home() == tmp_path / "c" / "irds" and s.ir_datasets_home is None
    # the third-party environment a job exports, and the other IRGRID_* variables; never unrelated ones
    assert dict(s.passthrough) == {"HF_HUB_OFFLINE": "1", "IRGRID_MODELS": "m.yaml", "OMP_NUM_THREADS": "2"}
    assert s.environment() == {**dict(s.passthrough), "IR_DATASETS_HOME": str(tmp_path / "c" / "irds")}
    flagged = Settings.from_env(env, cache=str(tmp_path / "flag"), tiny_models=None, verbose=True)
    assert (flagged.cache, flagged.tiny_models, flagged.verbose) == (tmp_path / "flag", True, True)
    assert Settings.from_env({}).cache == Path.home() / ".cache" / "irgrid"


@pytest.mark.parametrize(("env", "flags", "message"), [
    ({"IRGRID_DEVICE": "gpu0"}, {}, r"IRGRID_DEVICE='gpu0' is not a device: use cpu, cuda, cuda:N or mps"),
    ({"IRGRID_MAX_MODELS": "0"}, {}, r"IRGRID_MAX_MODELS='0' is not a whole number >= 1 .*unset it for 3"),
    ({"IRGRID_MAX_MODELS": "two"}, {}, r"IRGRID_MAX_MODELS='two'"),
    ({"IRGRID_TINY_MODELS": "maybe"}, {}, r"IRGRID_TINY_MODELS='maybe' is neither on nor off: use 1"),
    ({"IRGRID_VERBOSE": "loud"}, {}, r"IRGRID_VERBOSE='loud'"),
    ({}, {"cache": "FILE"}, r"--cache .*FILE is a file, not a folder; give a folder path"),
    ({"IRGRID_CACHE": "FILE"}, {}, r"IRGRID_CACHE .*FILE is a file, not a folder"),
])
def test_from_env_refuses_unusable_values_naming_the_variable_or_flag(tmp_path, env, flags, message):
    (tmp_path / "FILE").write_text("not a folder")
    fix = {k: str(tmp_path / v) if v == "FILE" else v for k, v in {**env, **flags}.items()}
    with pytest.raises(SettingsError, match=message):
        Settings.from_env({k: v for k, v in fix.items() if k in env}, **{k: v for k, v in fix.items() if k in flags})


def test_using_makes_settings_current_for_a_block_only(tmp_path, monkeypatch):
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "env"))
    mine = Settings.from_env({}, cache=str(tmp_path / "mine"), tiny_models=True)
    with settings.using(mine):
        assert settings.current() is mine
        assert (settings.cache_root(), settings.tiny_models(), settings.irds_home()) == (
            tmp_path / "mine", True, tmp_path / "mine" / "irds")
        from irgrid.store import Store

        assert Store().root == tmp_path / "mine"
    assert settings.cache_root() == tmp_path / "env"  # outside a block: the environment, read afresh
    monkeypatch.setenv("IRGRID_CACHE", str(tmp_path / "later"))
    assert settings.cache_root() == tmp_path / "later"


def test_a_bad_setting_is_one_cli_error_line(monkeypatch, capsys):
    from irgrid.cli import main

    monkeypatch.setenv("IRGRID_MAX_MODELS", "-1")
    assert main(["datasets", "--group", "msmarco"]) == 2
    assert capsys.readouterr().err == ("irgrid: error: IRGRID_MAX_MODELS='-1' is not a whole number >= 1 (how many "
                                       "loaded models a process keeps; unset it for 3)\n")
