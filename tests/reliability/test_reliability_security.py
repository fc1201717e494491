"""Security: no untrusted code runs, no pickle is loaded, data never becomes a path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error, run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from tiny_models import variant

from userturn.config import RunConfig
from userturn.output import safe_filename

RUN = ["--limit", "1", "--temperatures", "0", "--assistant-max-new-tokens", "2", "--user-max-new-tokens", "2",
       "--threads", "1", "--quiet"]


def test_remote_code_and_pickle_are_off_by_default():
    config = RunConfig()
    assert config.trust_remote_code is False
    assert "allow_pickle" not in config.backend_options


@pytest.mark.slow
def test_model_with_custom_code_is_refused_and_its_code_never_runs(capsys, tmp_path, monkeypatch, tiny_base):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "custom-code-ran"
    model = variant(tiny_base, tmp_path / "model", auto_map_marker=marker)
    result = run_cli(capsys, "run", "--model", str(model), *RUN, "--out", "out")
    assert_one_line_error(result, "ships its own Python code", "--trust-remote-code")
    assert not marker.exists()
    # The same folder with the flag: the code runs, so the refusal above is what kept it from running.
    allowed = run_cli(capsys, "run", "--model", str(model), *RUN, "--out", "out2", "--trust-remote-code")
    assert allowed.returncode == 0, allowed.stderr
    assert marker.is_dir()


@pytest.mark.slow
def test_pickle_weights_are_refused_and_never_unpickled(capsys, tmp_path, monkeypatch, tiny_base):
    monkeypatch.chdir(tmp_path)
    marker = tmp_path / "pickle-was-loaded"
    model = variant(tiny_base, tmp_path / "model", pickle_weights_marker=marker)
    result = run_cli(capsys, "run", "--model", str(model), *RUN, "--out", "out")
    assert_one_line_error(result, "only pickle weights", "pytorch_model.bin", "allow_pickle")
    assert not marker.exists()
    assert not (tmp_path / "out").exists()


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200) | st.sampled_from(["..", "../../etc/passwd", "/abs/path", "a/../../b", ".hidden",
                                                "..\\..\\windows", "", "\x00", "CON", "-rf"]))
def test_safe_filename_never_leaves_its_folder(text):
    name = safe_filename(text)
    assert name and "/" not in name and "\\" not in name and "\x00" not in name
    assert not name.startswith((".", "-"))
    assert name not in (".", "..")
    root = Path("/tmp/userturn-root")
    assert (root / name).resolve().parent == root.resolve()
    assert safe_filename(text) == name


def test_safe_filename_keeps_different_ids_apart():
    assert safe_filename("a/b") != safe_filename("a_b")
    assert safe_filename("../x") != safe_filename("x")


def _all_files(folder: Path) -> set[Path]:
    return {p.relative_to(folder) for p in folder.rglob("*")}


@pytest.mark.slow
def test_ids_with_path_traversal_are_data_not_paths(capsys, tmp_path, monkeypatch):
    from userturn.datasets import dataset_names

    if "jsonl" not in dataset_names():
        pytest.skip("the jsonl dataset (branch datasets) is not merged yet")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    ids = ["../../escaped", "/tmp/absolute-id", "..\\..\\win", "a/b/c"]
    (work / "d.jsonl").write_text("".join(json.dumps({"id": i, "query": f"Say {n}."}) + "\n"
                                          for n, i in enumerate(ids)))
    before_outside = {p for p in _all_files(tmp_path) if p.parts[0] != "work"}
    result = run_cli(capsys, "run", "--dataset", "jsonl", "--dataset-path", "d.jsonl", *RUN[2:], "--limit", "4",
                     "--out", "out")
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in (work / "out" / "samples.jsonl").read_text().splitlines()]
    assert sorted(r["item_id"] for r in rows) == sorted(ids)  # kept verbatim as data
    assert {p for p in _all_files(tmp_path) if p.parts[0] != "work"} == before_outside  # nothing was written outside the working folder
    assert not Path("/tmp/absolute-id").exists()
    assert not (tmp_path.parent / "escaped").exists() and not (tmp_path / "escaped").exists()
    assert all(".." not in p.parts for p in _all_files(work))


@pytest.mark.parametrize("payload", [
    "__import__('os').makedirs('{marker}')",
    "(lambda: __import__('os').makedirs('{marker}'))()",
    "[c for c in ().__class__.__base__.__subclasses__()]",
    "9^{{9^{{9^{{9}}}}}}",  # a power tower: parsing it with evaluation would never finish
])
def test_model_answers_are_never_evaluated_by_the_math_verifier(tmp_path, payload):
    from userturn.verifiers.math_answer import verify_math

    marker = tmp_path / "evaluated"
    response = "The answer is \\boxed{" + payload.format(marker=marker) + "}"
    verdict = verify_math(response, "1")
    assert verdict.correct is False
    assert not marker.exists()
