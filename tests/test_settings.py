"""Config: OITUI_HOME layout, precedence, types, bad TOML, profiles, saving, OI profile import."""

from __future__ import annotations

import os
import re
import tomllib
from pathlib import Path

import pytest

from oitui.core.errors import ConfigError
from oitui.core.settings import (
    DEFAULTS,
    KEY_TYPES,
    import_oi_profile,
    load_settings,
    load_settings_or_defaults,
    paths,
    save_setting,
)
from oitui.resources import resource_dir


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_oitui_home_layout(oitui_home):
    p = paths()
    assert p.home == oitui_home.resolve()
    assert p.config_file == oitui_home.resolve() / "config.toml"
    for attr, name in (("sessions_dir", "sessions"), ("outputs_dir", "outputs"), ("cache_dir", "cache"),
                       ("logs_dir", "logs"), ("skills_dir", "skills"), ("themes_dir", "themes")):
        assert getattr(p, attr) == oitui_home.resolve() / name
    assert not (oitui_home / "sessions").exists()  # paths() creates nothing
    p.ensure()
    assert (oitui_home / "sessions").is_dir() and (oitui_home / "logs").is_dir()


def test_paths_without_home_use_platformdirs():
    p = paths(environ={})
    assert p.home.name == "oitui" and p.config_file.name == "config.toml"
    assert p.sessions_dir.name == "sessions" and p.sessions_dir.parent.name == "oitui"
    assert "oitui" in str(p.cache_dir) and "oitui" in str(p.logs_dir)


def test_defaults_without_config(oitui_home):
    s = load_settings(environ={"OITUI_HOME": str(oitui_home)})
    for key, value in DEFAULTS.items():
        assert s[key] == value, key
        assert s.source_of(key) == "default"
    assert s["harness"] == "native" and s["max_output"] == 2800 and s["max_tool_output"] == 30000
    assert s["max_turns"] == 50 and s["auto_run"] is False and s["highlight_active_line"] is True
    assert s["mcp_servers"] == {} and s["hooks"] == {}
    assert s["default_models"]["openai"] == "gpt-4o"
    assert s.errors == []
    with pytest.raises(TypeError):
        s["model"] = "x"  # read-only


def test_config_precedence_default_config_profile_env_cli(oitui_home):
    write(oitui_home / "config.toml", """
model = "from-config"
max_output = 1000
auto_run = true
temperature = 0.5
max_turns = 7

[profiles.work]
model = "from-profile"
max_output = 2000

[mcp_servers.files]
command = "npx"
args = ["-y", "server"]

[hooks]
on_start = "echo hi"
""")
    env = {"OITUI_HOME": str(oitui_home)}
    s = load_settings(environ=env)
    assert (s["model"], s.source_of("model")) == ("from-config", "config")
    assert s["max_output"] == 1000 and s["auto_run"] is True and s["temperature"] == 0.5
    assert s["mcp_servers"] == {"files": {"command": "npx", "args": ["-y", "server"]}}
    assert s["hooks"] == {"on_start": "echo hi"}
    assert s.source_of("max_tool_output") == "default"

    s = load_settings(profile="work", environ=env)
    assert (s["model"], s.source_of("model")) == ("from-profile", "profile")
    assert s["max_output"] == 2000 and s["max_turns"] == 7

    env2 = {**env, "OITUI_MODEL": "from-env", "OITUI_AUTO_RUN": "no", "OITUI_MAX_BUDGET": "0.25",
            "OITUI_ADD_DIR": os.pathsep.join(["/a", "/b"])}
    s = load_settings(profile="work", environ=env2)
    assert (s["model"], s.source_of("model")) == ("from-env", "env")
    assert s["auto_run"] is False and s.source_of("auto_run") == "env"
    assert s["max_budget"] == 0.25 and s["add_dir"] == ["/a", "/b"]
    assert s["max_output"] == 2000  # the profile still wins over config

    s = load_settings(profile="work", environ=env2,
                      overrides={"model": "from-cli", "max_output": 5, "temperature": None, "max_turns": "9"})
    assert (s["model"], s.source_of("model")) == ("from-cli", "cli")
    assert s["max_output"] == 5 and s["max_turns"] == 9
    assert s["temperature"] == 0.5 and s.source_of("temperature") == "config"  # None = flag not given


def test_bad_toml_names_file_and_line(oitui_home):
    cfg = write(oitui_home / "config.toml", 'model = "gpt-4o"\nauto_run = true\nmax_output = = 3\n')
    with pytest.raises(ConfigError) as e:
        load_settings()
    msg = str(e.value)
    assert str(cfg) in msg and "line 3" in msg
    assert e.value.line == 3 and e.value.path == str(cfg)


def test_wrong_type_names_file_line_and_key(oitui_home):
    cfg = write(oitui_home / "config.toml",
                '# comment\nmodel = "gpt-4o"\n\n[profiles.x]\nmax_output = 5\n\n[profiles.y]\nauto_run = "yes"\n')
    load_settings(profile="x")  # fine
    with pytest.raises(ConfigError) as e:
        load_settings(profile="y")
    msg = str(e.value)
    assert str(cfg) in msg and "line 8" in msg and "auto_run" in msg
    assert e.value.key == "auto_run" and e.value.line == 8

    write(cfg, 'safe_mode = "sometimes"\n')
    with pytest.raises(ConfigError, match=r"line 1.*safe_mode.*'off', 'ask', 'auto'"):
        load_settings()
    write(cfg, 'max_output = -1\n')
    with pytest.raises(ConfigError, match="max_output"):
        load_settings()


def test_unknown_key_is_a_warning_and_unknown_profile_an_error(oitui_home):
    write(oitui_home / "config.toml", 'model = "m"\ncolour = "red"\n[profiles.a]\nmodle = "x"\n')
    s = load_settings(profile="a")
    assert s["model"] == "m"
    assert any("colour" in w and "line 2" in w for w in s.errors)
    assert any("modle" in w and "line 4" in w for w in s.errors)
    with pytest.raises(ConfigError, match=r"profile 'nope' not found.*profiles: a"):
        load_settings(profile="nope")


def test_bad_env_value_names_the_variable(oitui_home):
    with pytest.raises(ConfigError, match="OITUI_MAX_OUTPUT"):
        load_settings(environ={"OITUI_HOME": str(oitui_home), "OITUI_MAX_OUTPUT": "lots"})
    with pytest.raises(ConfigError, match="--max-turns"):
        load_settings(overrides={"max_turns": "many"})


def test_load_settings_or_defaults_keeps_going(oitui_home):
    write(oitui_home / "config.toml", "model = \n")
    s, err = load_settings_or_defaults(overrides={"auto_run": True})
    assert err is not None and "line 1" in err and "config.toml" in err
    assert s["model"] is None and s["auto_run"] is True and s.errors[0] == err
    write(oitui_home / "config.toml", 'model = "ok"\n')
    s, err = load_settings_or_defaults()
    assert err is None and s["model"] == "ok"


def test_default_toml_documents_every_key():
    path = resource_dir("config") / "default.toml"
    text = path.read_text(encoding="utf-8")
    data = tomllib.loads(text)
    for key, default in DEFAULTS.items():
        if default is None:
            assert re.search(rf"^# {key} = ", text, re.M), f"{key} not documented in {path}"
            assert key not in data
        else:
            assert data[key] == default, key
    assert set(data) - {"default_models"} <= set(KEY_TYPES)
    # the shipped file itself loads cleanly
    s = load_settings(config_path=path, environ={})
    assert s.errors == []


def test_default_models_are_known_to_litellm():
    import litellm

    data = tomllib.loads((resource_dir("config") / "default.toml").read_text(encoding="utf-8"))
    for provider, model in data["default_models"].items():
        assert model in litellm.model_cost, (provider, model)
        assert litellm.model_cost[model]["litellm_provider"] == provider


def test_save_setting_keeps_other_keys(oitui_home):
    cfg = write(oitui_home / "config.toml", 'model = "m"\n[profiles.a]\nauto_run = true\n[hooks]\nx = "y"\n')
    save_setting("theme", "oitui-light")
    data = tomllib.loads(cfg.read_text())
    assert data == {"model": "m", "theme": "oitui-light", "profiles": {"a": {"auto_run": True}}, "hooks": {"x": "y"}}
    save_setting("max_turns", 3, profile="a")
    assert load_settings(profile="a")["max_turns"] == 3
    save_setting("theme", None)
    assert "theme" not in tomllib.loads(cfg.read_text())
    with pytest.raises(ConfigError):
        save_setting("max_turns", "three")
    with pytest.raises(ConfigError):
        save_setting("no_such_key", 1)
    write(cfg, "broken = \n")
    with pytest.raises(ConfigError):
        save_setting("theme", "x")
    assert cfg.read_text() == "broken = \n"  # a bad file is never overwritten


def test_import_oi_profile(oitui_home, tmp_path):
    yml = write(tmp_path / "default.yaml", """
llm:
  model: "gpt-4o-mini"
  temperature: 0.3
  context_window: 64000
  max_tokens: 1000
  supports_functions: false
  api_base: "http://127.0.0.1:9/v1"
computer:
  import_computer_api: true
auto_run: true
custom_instructions: "Be brief."
offline: true
loop: false
version: 0.2.5
""")
    write(oitui_home / "config.toml", 'theme = "t"\n')
    skipped: list[str] = []
    mapped = import_oi_profile(yml, skipped=skipped)
    assert mapped == {"model": "gpt-4o-mini", "temperature": 0.3, "context_window": 64000, "max_tokens": 1000,
                      "llm_supports_functions": False, "api_base": "http://127.0.0.1:9/v1", "auto_run": True,
                      "custom_instructions": "Be brief.", "offline": True, "loop": False}
    assert skipped == ["computer.import_computer_api"]
    s = load_settings()
    assert s["model"] == "gpt-4o-mini" and s["theme"] == "t" and s["llm_supports_functions"] is False

    import_oi_profile(yml, profile="oi")
    s = load_settings(profile="oi")
    assert s.source_of("model") == "profile" and s["context_window"] == 64000

    bad = write(tmp_path / "bad.yaml", "llm:\n  model: [unclosed\n")
    with pytest.raises(ConfigError, match="bad.yaml"):
        import_oi_profile(bad)
    wrong = write(tmp_path / "wrong.yaml", "auto_run: maybe\n")
    with pytest.raises(ConfigError, match="auto_run"):
        import_oi_profile(wrong)


def test_apply_sets_interpreter_attributes(oitui_home):
    from oitui.core.interpreter import OpenInterpreter

    write(oitui_home / "config.toml", """
model = "gpt-4o-mini"
api_base = "http://127.0.0.1:1/v1"
api_key = "sk-config-key-123456"
temperature = 0.7
context_window = 9000
max_tokens = 300
llm_supports_functions = false
auto_run = true
max_output = 111
max_tool_output = 222
max_budget = 0.5
max_turns = 4
offline = true
custom_instructions = "ci"
system_message = "sm"
python = "/usr/bin/python3"
highlight_active_line = false
""")
    interp = OpenInterpreter()
    load_settings().apply(interp)
    llm = interp.llm
    assert (llm.model, llm.api_base, llm.api_key, llm.temperature, llm.context_window, llm.max_tokens,
            llm.supports_functions) == ("gpt-4o-mini", "http://127.0.0.1:1/v1", "sk-config-key-123456", 0.7,
                                        9000, 300, False)
    assert (interp.auto_run, interp.max_output, interp.max_tool_output, interp.max_budget, interp.max_turns,
            interp.offline, interp.custom_instructions, interp.system_message) == (
        True, 111, 222, 0.5, 4, True, "ci", "sm")
    assert interp.computer.python == "/usr/bin/python3"
    assert interp.computer.highlight_active_line is False

    fresh = OpenInterpreter()
    original = fresh.system_message
    write(oitui_home / "config.toml", 'model = "x"\n')
    load_settings().apply(fresh)
    assert fresh.system_message == original  # system_message only replaced when set
