"""--responses files: lm-eval samples and plain JSONL, with errors naming file, line and field."""

from __future__ import annotations

import json

import pytest

from userturn.errors import DataError
from userturn.records import Item, Message
from userturn.responses import apply_responses, read_responses


def write(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def items(*ids: str, dataset: str = "gsm8k") -> list[Item]:
    return [Item(id=i, dataset=dataset, messages=(Message("user", f"q{i}"),)) for i in ids]


def test_lm_eval_samples_use_doc_id_and_the_raw_generation(tmp_path):
    # lm-eval writes one line per filter: same doc, same raw response, different filtered answers
    f = write(tmp_path / "samples_gsm8k.jsonl", [
        {"doc_id": 0, "doc": {"question": "q"}, "resps": [["She pays 18 dollars."]], "filtered_resps": ["18"],
         "filter": "strict-match"},
        {"doc_id": 0, "doc": {"question": "q"}, "resps": [["She pays 18 dollars."]], "filtered_resps": ["18"],
         "filter": "flexible-extract"},
        {"doc_id": 1, "resps": [["It is 3."]], "filtered_resps": ["3"]},
    ])
    matched, missing = apply_responses(items("0", "1", "2"), read_responses(f), f)
    assert [(i.id, i.given_response) for i in matched] == [("0", "She pays 18 dollars."), ("1", "It is 3.")]
    assert [i.id for i in missing] == ["2"]


def test_userturn_samples_and_dataset_fields_are_matched(tmp_path):
    f = write(tmp_path / "r.jsonl", [{"item_id": "m01", "dataset": "demo", "assistant_response": "216"},
                                     {"item_id": "m01", "dataset": "other", "assistant_response": "no"}])
    matched, _ = apply_responses(items("m01", dataset="demo"), read_responses(f), f)
    assert matched[0].given_response == "216"


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        (['{"id": 1, "response": "a"}', "not json"], r"r\.jsonl:2: not valid JSON"),
        ([{"response": "a"}], r"r\.jsonl:1: field 'item_id': no item id"),
        ([{"id": "a", "text": "x"}], r"r\.jsonl:1: field 'response': no response"),
        ([{"id": "a", "response": 3}], r"r\.jsonl:1: field 'response': the response must be a string"),
        ([{"id": "a", "response": "x"}, {"id": "a", "response": "y"}], r"r\.jsonl:2: .*different response on line 1"),
        ([], "no responses"),
    ],
)
def test_bad_response_files_name_the_file_line_and_field(tmp_path, rows, message):
    f = write(tmp_path / "r.jsonl", rows)
    with pytest.raises(DataError, match=message):
        read_responses(f)


def test_a_file_matching_no_item_shows_both_numberings(tmp_path):
    f = write(tmp_path / "r.jsonl", [{"id": "gsm8k-0", "response": "x"}])
    with pytest.raises(DataError, match="file ids: gsm8k-0.*item ids: 0"):
        apply_responses(items("0"), read_responses(f), f)


def test_missing_file(tmp_path):
    with pytest.raises(DataError, match="file not found"):
        read_responses(tmp_path / "nope.jsonl")
