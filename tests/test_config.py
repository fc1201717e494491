"""Run configuration: defaults, config files, flag overrides and clear errors."""

from __future__ import annotations

import pytest

from userturn.config import RunConfig, build_config
from userturn.errors import ConfigError


def test_defaults_are_the_embedded_demo_probe():
    c = RunConfig()
    assert (c.model, c.datasets, c.temperatures, c.samples) == ("embedded", ["demo"], [0.0, 0.7, 1.0], 4)


def test_flags_override_the_config_file(tmp_path):
    f = tmp_path / "run.toml"
    f.write_text('temperatures = [0.5]\nsamples = 2\nuser-max-new-tokens = 16\n')
    c = build_config(f, {"samples": 3, "limit": None})
    assert c.temperatures == [0.5] and c.samples == 3 and c.user_max_new_tokens == 16


def test_yaml_config_is_accepted(tmp_path):
    f = tmp_path / "run.yaml"
    f.write_text("datasets: [demo]\nlimit: 2\n")
    assert build_config(f, {}).limit == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("samples = 0\n", "field 'samples'"),
        ("temperatures = [-1.0]\n", "field 'temperatures'"),
        ("top_p = 1.5\n", "field 'top_p'"),
        ("user_max_new_tokens = 0\n", "field 'user_max_new_tokens'"),
        ("colour = 'red'\n", "field 'colour': unknown key"),
        ("samples = 'many'\n", "field 'samples'"),
        ("limit = -1\n", "field 'limit'"),
    ],
)
def test_bad_config_file_values_name_the_file_and_field(tmp_path, content, message):
    f = tmp_path / "bad.toml"
    f.write_text(content)
    with pytest.raises(ConfigError) as err:
        build_config(f, {})
    assert str(f) in str(err.value) and message in str(err.value)


def test_unparseable_config_file_is_one_clear_error(tmp_path):
    f = tmp_path / "bad.toml"
    f.write_text("samples = = 3")
    with pytest.raises(ConfigError, match="cannot parse"):
        build_config(f, {})


def test_fingerprint_ignores_where_results_go_but_not_what_they_are(tmp_path):
    a = RunConfig(out=tmp_path / "a")
    assert a.fingerprint() == RunConfig(out=tmp_path / "b", batch_size=8).fingerprint()
    assert a.fingerprint() != RunConfig(samples=5).fingerprint()
