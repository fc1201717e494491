"""Restarting a finished run answers from run.json without loading a model, unless something changed."""

from __future__ import annotations

import json

import pytest

import userturn.pipeline as pipeline
from userturn.config import RunConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory, smol_backend):
    out = tmp_path_factory.mktemp("fast") / "run"
    config = RunConfig(limit=2, temperatures=[0.0], assistant_max_new_tokens=6, user_max_new_tokens=4, out=out)
    patch = pytest.MonkeyPatch()
    patch.setattr(pipeline, "load_backends", lambda config, reporter: (smol_backend, smol_backend))
    patch.setenv("USERTURN_KEEP_MODELS", "1")
    try:
        first = pipeline.run_probe(config)
    finally:
        patch.undo()
    assert not first.nothing_to_do and first.generated == 4
    return config, out


def _no_model(config, reporter):
    raise AssertionError("a model was loaded")


def test_restarting_a_finished_run_says_nothing_to_do_without_loading_a_model(finished, monkeypatch):
    config, out = finished
    monkeypatch.setattr(pipeline, "load_backends", _no_model)
    again = pipeline.run_probe(config)
    assert again.nothing_to_do and again.generated == 0 and again.sample_count == 2
    assert json.loads((out / "summary.json").read_text())["generated"] == 0
    assert again.rows == json.loads((out / "summary.json").read_text())["rows"]


def test_a_changed_item_set_goes_through_the_stages(finished, monkeypatch):
    config, out = finished
    meta = json.loads((out / "run.json").read_text())
    monkeypatch.setattr(pipeline, "load_backends", _no_model)
    changed = dict(meta, completion=dict(meta["completion"], items="0" * 64))
    (out / "run.json").write_text(json.dumps(changed))
    try:
        with pytest.raises(AssertionError, match="a model was loaded"):
            pipeline.run_probe(config)
    finally:
        (out / "run.json").write_text(json.dumps(meta))


def test_an_unfinished_run_goes_through_the_stages(finished, monkeypatch):
    config, out = finished
    meta = json.loads((out / "run.json").read_text())
    monkeypatch.setattr(pipeline, "load_backends", _no_model)
    (out / "run.json").write_text(json.dumps(dict(meta, status="running")))
    try:
        with pytest.raises(AssertionError, match="a model was loaded"):
            pipeline.run_probe(config)
    finally:
        (out / "run.json").write_text(json.dumps(meta))
