"""Property-based tests: arbitrary Unicode never crashes the template opener, the answer extractors or
the rules classifier, and the opener's sentinel never reaches a prompt."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from userturn.classifiers import ClassifyInput, load_classifier
from userturn.errors import TemplateError
from userturn.records import LABELS, Message
from userturn.templates import SENTINEL, _apply, open_user_turn, render_assistant_prompt, sentinel_for
from userturn.verifiers.gsm8k import verify_gsm8k
from userturn.verifiers.math_answer import verify_math
from userturn.verifiers.numeric import extract_last_number, normalize_number, numbers_equal

# Everything Unicode has but surrogates (which cannot be encoded), with the sentinel and markup mixed in.
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
TRICKY = st.sampled_from([SENTINEL, SENTINEL + "1Z", "<|im_start|>user\n", "<|im_end|>", "{{ x }}", "{% if %}",
                          "\x00", "\r\n", "\u202e", "🙂", "<think>", "</think>"])
TEXT = st.lists(st.one_of(ANY_TEXT, TRICKY), max_size=4).map("".join)
FEW = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FEW
@given(query=TEXT, response=TEXT)
@example(query=SENTINEL, response=SENTINEL + SENTINEL)
@example(query="", response="")
def test_user_turn_opener_accepts_any_text_and_never_leaks_the_sentinel(smol_tokenizer, query, response):
    messages = [Message("user", query), Message("assistant", response)]
    try:
        prompt = open_user_turn(smol_tokenizer, messages, model_name="SmolLM2")
    except TemplateError:
        pytest.fail("SmolLM2's template opens a user turn after any conversation")
    so_far = _apply(smol_tokenizer, messages, add_generation_prompt=False, thinking=None)
    assert prompt == so_far + "<|im_start|>user\n"
    # The sentinel (or the variant picked for this conversation) appears only where the data put it.
    assert prompt.count(SENTINEL) == (query + "\n" + response).count(SENTINEL)
    assert sentinel_for(messages) not in prompt
    assert render_assistant_prompt(smol_tokenizer, [Message("user", query)]).endswith("<|im_start|>assistant\n")


@FEW
@given(text=TEXT)
def test_number_extraction_never_crashes_and_returns_a_number_from_the_text(text):
    found = extract_last_number(text)
    if found is not None:
        assert normalize_number(found) is not None  # whatever is extracted parses as a number
    numbers_equal(found, text)
    numbers_equal(text, text)


@FEW
@given(prefix=TEXT, value=st.integers(min_value=-10**12, max_value=10**12))
def test_a_number_written_last_is_the_number_extracted(prefix, value):
    found = extract_last_number(f"{prefix} so the answer is {value}")
    assert found is not None and normalize_number(found) == Decimal(value)
    assert numbers_equal(found, str(value))


@FEW
@given(response=TEXT, gold=st.integers(min_value=-10**9, max_value=10**9))
def test_gsm8k_verifier_scores_any_text_and_finds_a_final_answer(response, gold):
    verdict = verify_gsm8k(response, f"work... #### {gold}")
    assert verdict.correct in (True, False)
    right = verify_gsm8k(f"{response}\nThe answer is {gold}", f"#### {gold}")
    assert right.correct is True, right


LATEX = st.lists(st.sampled_from(["\\frac{", "}", "{", "\\sqrt", "^", "x", "2", "9", "(", ")", "+", "*", "-",
                                  "__import__", "'os'", ".", "[", "]", "!", "lambda", "e", "pi", ","]),
                 max_size=12).map("".join)


@FEW
@given(answer=st.one_of(TEXT, LATEX))
def test_math_verifier_scores_any_answer_without_running_it(answer):
    verdict = verify_math(f"So the answer is \\boxed{{{answer}}}.", "2")
    assert verdict.correct in (True, False)


@FEW
@given(query=TEXT, response=TEXT, turn=TEXT, finish=st.sampled_from(["stop", "length"]))
def test_rules_classifier_labels_any_text_with_a_known_label(query, response, turn, finish):
    classifier = load_classifier("rules")
    x = ClassifyInput(query=query, response=response, user_turn=turn, finish_reason=finish,
                      special_tokens=("<|im_start|>", "<|im_end|>", "<|endoftext|>"))
    (label,) = classifier.classify([x])
    assert label.label in LABELS
    assert classifier.classify([x]) == [label]  # deterministic


@given(n=st.integers(min_value=0, max_value=5000), data=st.data())
def test_wilson_interval_always_contains_the_observed_rate(n, data):
    from userturn.stats import wilson_interval

    successes = data.draw(st.integers(min_value=0, max_value=n))
    low, high = wilson_interval(successes, n)
    rate = successes / n if n else 0.0
    assert 0.0 <= low <= rate <= high <= 1.0
