"""IFEval: every instruction type in both directions, strict vs loose, and offline text splitting."""

from __future__ import annotations

import json

import pytest
from shared_data import SHARED_DATA, needs_shared_data

from userturn.verifiers.ifeval import INSTRUCTIONS, check_instruction, evaluate_ifeval
from userturn.verifiers.text import count_sentences, count_words, split_sentences

# (instruction id, kwargs, a response that follows it, a response that does not)
CASES = [
    ("keywords:existence", {"keywords": ["Paris", "river"]}, "PARIS sits on a River.", "Paris is nice."),
    ("keywords:frequency", {"keyword": "cat", "frequency": 3, "relation": "at least"},
     "Cat, cat and CAT.", "One cat, two cats."),
    ("keywords:frequency", {"keyword": "dog", "frequency": 2, "relation": "less than"},
     "A dog.", "Dog and dog."),
    ("keywords:forbidden_words", {"forbidden_words": ["bad", "ugly"]}, "Badly drawn but fine.", "It is Ugly."),
    ("keywords:letter_frequency", {"letter": "z", "let_frequency": 2, "let_relation": "at least"},
     "Zig zag.", "Zig."),
    ("language:response_language", {"language": "de"},
     "Das ist ein kurzer Satz auf Deutsch, und er ist ganz einfach zu verstehen.",
     "This is a short sentence in English and it is easy to understand."),
    ("change_case:english_capital", {}, "THIS IS ALL IN CAPITAL LETTERS, AS ASKED.", "THIS IS MOSTLY in capitals."),
    ("change_case:english_lowercase", {}, "this is all in lowercase letters, as asked.", "this is Mostly lowercase."),
    ("change_case:capital_word_frequency", {"capital_frequency": 2, "capital_relation": "less than"},
     "Only ONE word here.", "TWO WORDS here."),
    ("length_constraints:number_words", {"num_words": 5, "relation": "less than"}, "Four words right here.",
     "Five words are right here."),
    ("length_constraints:number_sentences", {"num_sentences": 2, "relation": "at least"},
     "Mr. Smith came. He left!", "Mr. Smith came home at 5 p.m. today."),
    ("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "First part.\n***\nSecond part.",
     "First.\n***\n***\nSecond."),
    ("length_constraints:nth_paragraph_first_word", {"num_paragraphs": 2, "nth_paragraph": 2, "first_word": "then"},
     "Start here.\n\n\"Then, the end.", "Start here.\n\nNow the end."),
    ("detectable_content:number_placeholders", {"num_placeholders": 2}, "Dear [name], at [address].",
     "Dear [name], at home."),
    ("detectable_content:postscript", {"postscript_marker": "P.S."}, "Hello.\n\np. s. see you", "Hello.\nPS see you"),
    ("detectable_content:postscript", {"postscript_marker": "P.P.S"}, "Hi.\nP.P.S. more", "Hi.\nP.S. more"),
    ("detectable_format:number_bullet_lists", {"num_bullets": 2}, "* one\n- two", "* one\n* two\n* three"),
    ("detectable_format:constrained_response", {}, "My answer is maybe.", "My answer is perhaps."),
    ("detectable_format:number_highlighted_sections", {"num_highlights": 2}, "*one* and **two**", "*one* and ** **"),
    ("detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2},
     "Section 1\nintro\nSection 2\nend", "Section 1\nall of it"),
    ("detectable_format:json_format", {}, '```json\n{"a": 1}\n```', "{'a': 1}"),
    ("detectable_format:title", {}, "<<A Good Title>>\nText.", "<< >>\nText."),
    ("combination:two_responses", {}, "First answer.\n******\nSecond answer.", "Same.\n******\nSame."),
    ("combination:repeat_prompt", {"prompt_to_repeat": "Write a poem."}, "write a poem. Roses are red.",
     "Roses are red. Write a poem."),
    ("startend:end_checker", {"end_phrase": "Any other questions?"}, '"That is all. Any other questions?"',
     "Any other questions? Bye."),
    ("startend:quotation", {}, '"wrapped in quotes"', '"only at the start'),
    ("punctuation:no_comma", {}, "No commas here.", "One, comma."),
]


def test_all_25_instruction_types_are_registered() -> None:
    assert len(INSTRUCTIONS) == 25
    assert {case[0] for case in CASES} == set(INSTRUCTIONS)


@pytest.mark.parametrize(("instruction_id", "kwargs", "good", "bad"), CASES, ids=[c[0] for c in CASES])
def test_instruction_accepts_and_rejects(instruction_id: str, kwargs: dict, good: str, bad: str) -> None:
    assert check_instruction(instruction_id, good, kwargs) is True
    assert check_instruction(instruction_id, bad, kwargs) is False


def test_empty_response_follows_no_instruction() -> None:
    assert check_instruction("punctuation:no_comma", "   ", {}) is False


def test_loose_forgives_an_intro_line_and_markdown_stars_but_strict_does_not() -> None:
    response = "Sure, here it is:\n\"the whole answer in quotes\""
    result = evaluate_ifeval(response, ["startend:quotation"], [{}])
    assert result.strict == (False,) and result.loose == (True,)
    starred = evaluate_ifeval('*"quoted and emphasised"*', ["startend:quotation"], [{}])
    assert starred.strict == (False,) and starred.loose == (True,)
    commas = evaluate_ifeval("Intro line\nstill, a comma\nlast line", ["punctuation:no_comma"], [{}])
    assert commas.loose == (False,)


def test_prompt_level_needs_every_instruction() -> None:
    result = evaluate_ifeval("no commas here", ["punctuation:no_comma", "change_case:english_capital"], [{}, {}])
    assert result.strict == (True, False) and result.prompt_strict is False


def test_none_kwargs_are_ignored_and_bad_relations_fail_loudly() -> None:
    assert check_instruction("punctuation:no_comma", "ok", {"unused": None}) is True
    with pytest.raises(ValueError, match="relation"):
        check_instruction("length_constraints:number_words", "a b", {"num_words": 1, "relation": "about"})


def test_sentence_rule_keeps_abbreviations_initials_and_list_numbers_together() -> None:
    assert split_sentences("Dr. Who met J. K. Rowling. Then they left.") == [
        "Dr. Who met J. K. Rowling.", "Then they left."]
    assert count_sentences("1. Apples\n2. Pears are good. Yes!") == 2
    assert count_sentences("Pi is 3.14. Wow... Really?!") == 3
    assert count_sentences("") == 0
    assert count_words("Don't stop-believing, 3.5 times") == 7  # Don t stop believing 3 5 times


@needs_shared_data
def test_every_real_ifeval_item_can_be_scored() -> None:
    rows = [json.loads(line) for line in (SHARED_DATA / "ifeval" / "input_data.jsonl").open()]
    response = "Hello world. This is a plain response, with one comma."
    counts = 0
    for row in rows:
        result = evaluate_ifeval(response, row["instruction_id_list"], row["kwargs"], row["prompt"])
        counts += len(result.strict)
    assert counts == 834
