"""Perturbations: pure functions on hand-built scored turns."""

from __future__ import annotations

import pytest

from userturn.errors import ConfigError
from userturn.perturbations import (
    check_all_options,
    get_perturbation,
    perturbation_names,
    replace_number,
    resolve_options,
    swap_partner,
    truncate_text,
)
from userturn.records import AssistantTurn, Item, Message, ScoredTurn, Verdict
from userturn.stages.user_turn import build_contexts
from userturn.verifiers.numeric import extract_last_number, normalize_number


def scored(item_id: str, response: str, *, answer: str | None = None, query: str = "How much?",
           model: str = "m", system: str | None = None, meta: dict | None = None,
           dataset: str = "demo") -> ScoredTurn:
    messages = ((Message("system", system),) if system else ()) + (Message("user", query),)
    item = Item(id=item_id, dataset=dataset, messages=messages, answer=answer, meta=meta or {})
    turn = AssistantTurn(item=item, model=model, prompt="p", response=response, response_visible=response,
                         finish_reason="stop")
    extracted = extract_last_number(response) if answer is not None or meta else None
    return ScoredTurn(turn=turn, verdict=Verdict(correct=None, extracted=extracted))


def apply(name: str, s: ScoredTurn, population=None, seed: int = 0, **options):
    return get_perturbation(name).apply(s, population or [s], resolve_options(name, options), seed)


def test_every_perturbation_of_the_issue_is_registered_with_a_direction():
    expected = {"none": "none", "truncate": "up", "wrong_answer": "up", "swap_response": "up",
                "empty_response": "down", "no_context": "down", "append_question": "up", "system_prompt": "up"}
    assert set(expected) <= set(perturbation_names())
    assert {n: get_perturbation(n).expected for n in expected} == expected


def test_control_is_the_context_unchanged():
    s = scored("a", "It costs 5 dollars.")
    assert apply("none", s) == (Message("user", "How much?"), Message("assistant", "It costs 5 dollars."))


@pytest.mark.parametrize(
    ("text", "fraction", "cut"),
    [
        ("one two three four", 0.5, "one two"),
        ("one two three four", 0.9, "one two three"),      # floor(3.6) = 3 words
        ("one two three four", 0.1, "one"),                # at least one word
        ("a b\n\nc d e f", 0.5, "a b\n\nc"),               # inner whitespace kept, cut after a word
        ("  lead  two", 0.5, "  lead"),
    ],
)
def test_truncate_cuts_at_a_word_boundary(text, fraction, cut):
    assert truncate_text(text, fraction) == cut


def test_truncate_does_not_apply_to_a_one_word_response():
    assert truncate_text("Yes.", 0.5) is None
    assert apply("truncate", scored("a", "Yes.")) is None


def test_truncate_keeps_the_query_and_uses_the_fraction_option():
    s = scored("a", "w1 w2 w3 w4 w5 w6 w7 w8 w9 w10")
    assert apply("truncate", s, fraction=0.3)[-1] == Message("assistant", "w1 w2 w3")
    assert apply("truncate", s)[0] == Message("user", "How much?")


def test_wrong_answer_replaces_every_occurrence_of_the_final_answer_only():
    s = scored("m1", "3 × 72 = 216, so it earns 216 dollars. Not 2160 or 216.5. Answer: 216", answer="216")
    text = apply("wrong_answer", s)[-1].content
    wrong = text.split("Answer: ")[1]
    assert normalize_number(wrong) not in (None, normalize_number("216"))
    assert text == f"3 × 72 = {wrong}, so it earns {wrong} dollars. Not 2160 or 216.5. Answer: {wrong}"


def test_wrong_answer_is_seeded_per_item_and_independent_of_the_model():
    a = scored("m1", "The total is 40.", answer="40", model="model-a")
    b = scored("m1", "The total is 40.", answer="40", model="model-b")
    assert apply("wrong_answer", a, seed=3) == apply("wrong_answer", b, seed=3)
    variants = {apply("wrong_answer", a, seed=seed)[-1].content for seed in range(20)}
    assert len(variants) > 1
    assert all(extract_last_number(v) != "40" for v in variants)


def test_wrong_answer_is_plausible_near_the_answer_and_keeps_the_format():
    s = scored("m1", "She pays $1,800 in total.", answer="1800")
    text = apply("wrong_answer", s)[-1].content
    number = extract_last_number(text)
    assert "," in number and number != "1,800"
    assert 1800 * 0.6 <= float(normalize_number(number)) <= 1800 * 1.4


def test_wrong_answer_never_lands_on_the_gold_answer_of_an_already_wrong_response():
    # the response says 30 but the gold is 33: 30 ± 3 could hit 33, which must be avoided
    for seed in range(30):
        s = scored("m1", "It is 30.", answer="33")
        assert extract_last_number(apply("wrong_answer", s, seed=seed)[-1].content) not in ("30", "33")


def test_wrong_answer_reads_the_gold_number_of_gsm8k_style_items():
    s = scored("0", "So she makes 18 dollars.", answer="... 16 - 3 - 4 = 9 ... #### 18", meta={"gold": "18"},
               dataset="gsm8k")
    assert extract_last_number(apply("wrong_answer", s)[-1].content) != "18"


def test_wrong_answer_does_not_apply_without_a_numeric_answer():
    assert apply("wrong_answer", scored("i1", "Here are three bullet points.")) is None
    assert apply("wrong_answer", scored("m1", "I do not know.", answer="12")) is None


def test_replace_number_leaves_other_numbers_and_counts_replacements():
    text, count = replace_number("1.5 and 15 and -15, 15.", normalize_number("15"), normalize_number("17"))
    assert (text, count) == ("1.5 and 17 and -15, 17.", 2)


def test_swap_pairs_every_item_with_another_one_deterministically():
    ids = ["a", "b", "c", "d", "e"]
    partners = [swap_partner(i, ids, seed=0) for i in ids]
    assert sorted(partners) == ids                       # every response is used once
    assert all(p != i for i, p in zip(ids, partners, strict=True))
    assert partners == [swap_partner(i, list(reversed(ids)), seed=0) for i in ids]  # order does not matter
    assert swap_partner("a", ["a"], seed=0) is None


def test_swap_response_shows_the_partner_response_after_the_own_query():
    population = [scored(i, f"answer of {i}", query=f"question {i}") for i in "abc"]
    for s in population:
        context = apply("swap_response", s, population)
        assert context[0] == Message("user", f"question {s.turn.item.id}")
        assert context[1].content != f"answer of {s.turn.item.id}"
        assert context[1].content.startswith("answer of ")


def test_empty_response_and_no_context():
    s = scored("a", "Five.")
    assert apply("empty_response", s) == (Message("user", "How much?"), Message("assistant", ""))
    assert apply("no_context", s) == ()


def test_append_question_ends_the_response_with_a_question():
    s = scored("a", "Five.  ")
    assert apply("append_question", s)[-1].content.startswith("Five.\n\nWould you like")
    assert apply("append_question", s, text="Anything else?")[-1].content == "Five.\n\nAnything else?"


def test_system_prompt_adds_or_replaces_the_system_message():
    assert apply("system_prompt", scored("a", "Five."), text="A curious user.")[0] == Message("system",
                                                                                             "A curious user.")
    with_own = scored("a", "Five.", system="Be brief.")
    context = apply("system_prompt", with_own, text="A curious user.")
    assert [m.role for m in context] == ["system", "user", "assistant"]
    assert context[0].content == "A curious user."


def test_options_are_converted_and_checked():
    assert resolve_options("truncate", {"fraction": "0.3"}) == {"fraction": 0.3}
    assert resolve_options("truncate") == {"fraction": 0.5}
    with pytest.raises(ConfigError, match="truncate.colour"):
        resolve_options("truncate", {"colour": 1})
    with pytest.raises(ConfigError, match="between 0 and 1"):
        resolve_options("truncate", {"fraction": 1.5})
    with pytest.raises(ConfigError, match="expected a number"):
        resolve_options("truncate", {"fraction": "half"})
    with pytest.raises(ConfigError, match="not in --perturb"):
        check_all_options(["none"], {"truncate": {"fraction": 0.3}})
    with pytest.raises(ConfigError, match="unknown perturbation"):
        check_all_options(["none", "trunkate"], {"trunkate": {}})


def test_build_contexts_skips_items_a_perturbation_does_not_apply_to_and_records_options():
    population = [scored("m1", "It is 12.", answer="12"), scored("i1", "A haiku about rain.")]
    contexts = build_contexts(population, ["none", "wrong_answer", "truncate"], {"truncate": {"fraction": 0.25}})
    by = {(c.perturbation, c.scored.turn.item.id): c for c in contexts}
    assert set(by) == {("none", "m1"), ("none", "i1"), ("wrong_answer", "m1"), ("truncate", "m1"),
                       ("truncate", "i1")}
    assert by[("truncate", "i1")].options == {"fraction": 0.25}
    assert by[("truncate", "i1")].messages[-1].content == "A"


def test_the_classifier_sees_the_context_the_user_model_saw():
    from userturn.records import UserTurn, UserTurnContext
    from userturn.stages.classify import classify_input

    s = scored("a", "It is 5.", query="How much is 2 + 3?")
    inputs = {}
    for name in ("none", "no_context", "empty_response"):
        context = UserTurnContext(scored=s, perturbation=name, messages=apply(name, s))
        turn = UserTurn(context=context, user_model="m", prompt="p", temperature=0.0, sample_index=0, seed=0,
                        text="Why 5?", finish_reason="stop")
        inputs[name] = classify_input(turn)
    assert (inputs["none"].query, inputs["none"].response) == ("How much is 2 + 3?", "It is 5.")
    assert (inputs["no_context"].query, inputs["no_context"].response) == ("", "")
    assert (inputs["empty_response"].query, inputs["empty_response"].response) == ("How much is 2 + 3?", "")
