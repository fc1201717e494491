"""Opening a user turn with real chat templates of four families, against golden rendered strings."""

from __future__ import annotations

import copy

import pytest

from userturn.errors import TemplateError
from userturn.records import Message
from userturn.templates import (
    SENTINEL,
    open_user_turn,
    render_assistant_prompt,
    strip_reasoning,
    turn_end,
    user_header,
)

# Templates written for these tests; each reproduces its family's published token strings.
CHATML = (
    "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n{% endif %}"
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
LLAMA3 = (
    "{{ '<|begin_of_text|>' }}{% for m in messages %}"
    "<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)
GEMMA = (
    "{{ '<bos>' }}{% for m in messages %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% set role = 'model' if m['role'] == 'assistant' else m['role'] %}"
    "<start_of_turn>{{ role }}\n{{ m['content'] | trim }}<end_of_turn>\n{% endfor %}"
    "{% if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
)
NO_SYSTEM = (  # Mistral-instruct style: no system role, strict alternation
    "{{ '<s>' }}{% for m in messages %}"
    "{% if m['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"
    "{% if (m['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if m['role'] == 'user' %}{{ '[INST] ' + m['content'] + ' [/INST]' }}"
    "{% else %}{{ m['content'] + '</s>' }}{% endif %}{% endfor %}"
)
FAMILY_TOKENS = {
    "chatml": ["<|im_start|>", "<|im_end|>"],
    "llama3": ["<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"],
    "gemma": ["<bos>", "<start_of_turn>", "<end_of_turn>"],
    "no_system": ["<s>", "</s>"],
}
TEMPLATES = {"chatml": CHATML, "llama3": LLAMA3, "gemma": GEMMA, "no_system": NO_SYSTEM}
CONVO = (Message("user", "What is 2+3?"), Message("assistant", "2 + 3 = 5."))
GOLDEN = {
    "chatml": "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhat is 2+3?<|im_end|>\n"
              "<|im_start|>assistant\n2 + 3 = 5.<|im_end|>\n<|im_start|>user\n",
    "llama3": "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+3?<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n2 + 3 = 5.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\n",
    "gemma": "<bos><start_of_turn>user\nWhat is 2+3?<end_of_turn>\n<start_of_turn>model\n2 + 3 = 5.<end_of_turn>\n"
             "<start_of_turn>user\n",
    "no_system": "<s>[INST] What is 2+3? [/INST]2 + 3 = 5.</s>[INST] ",
}
END_OF_TURN = {"chatml": "<|im_end|>", "llama3": "<|eot_id|>", "gemma": "<end_of_turn>", "no_system": "</s>"}


@pytest.fixture(scope="module")
def family(smol_tokenizer):
    def make(name: str):
        tok = copy.deepcopy(smol_tokenizer)
        tok.chat_template = TEMPLATES[name]
        tok.add_special_tokens({"additional_special_tokens": FAMILY_TOKENS[name]})
        return tok

    return make


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_open_user_turn_matches_golden_rendering(family, name):
    assert open_user_turn(family(name), CONVO, model_name=name) == GOLDEN[name]


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_sentinel_never_leaks_into_prompt(family, name):
    assert SENTINEL not in open_user_turn(family(name), CONVO, model_name=name)


@pytest.mark.parametrize("name", sorted(TEMPLATES))
def test_turn_end_finds_the_family_end_of_turn_token(family, name):
    tok = family(name)
    end = turn_end(tok)
    assert tok.convert_tokens_to_ids(END_OF_TURN[name]) in end.token_ids


def test_smollm2_user_turn_opens_after_its_own_system_prompt(smol_tokenizer):
    text = open_user_turn(smol_tokenizer, CONVO, model_name="SmolLM2")
    assert text == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
        "<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n2 + 3 = 5.<|im_end|>\n<|im_start|>user\n"
    )
    assert user_header(smol_tokenizer) == "<|im_start|>user\n"


def test_assistant_prompt_uses_generation_prompt(smol_tokenizer):
    text = render_assistant_prompt(smol_tokenizer, CONVO[:1])
    assert text.endswith("<|im_start|>user\nWhat is 2+3?<|im_end|>\n<|im_start|>assistant\n")


def test_template_rejecting_a_system_message_names_the_model(family):
    with pytest.raises(TemplateError, match="mistral-like"):
        open_user_turn(family("no_system"), (Message("system", "Be kind."), *CONVO), model_name="mistral-like")


def test_template_that_cannot_follow_an_assistant_with_a_user_fails_clearly(family):
    tok = family("chatml")
    tok.chat_template = (
        "{% for m in messages %}{% if loop.index0 > 1 %}{{ raise_exception('only one exchange') }}{% endif %}"
        "<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    )
    with pytest.raises(TemplateError, match="cannot open a user turn"):
        open_user_turn(tok, CONVO, model_name="one-shot")


def test_template_that_drops_user_content_is_rejected(family):
    tok = family("chatml")
    tok.chat_template = "{% for m in messages %}<|im_start|>{{ m['role'] }}\n<|im_end|>\n{% endfor %}"
    with pytest.raises(TemplateError, match="verbatim"):
        open_user_turn(tok, CONVO, model_name="lossy")


def test_empty_context_gives_a_bare_user_header(family):
    assert open_user_turn(family("llama3"), ()) == "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n"


@pytest.mark.parametrize(
    ("raw", "visible"),
    [
        ("<think>carry the 1</think>The answer is 5.", "The answer is 5."),
        ("The answer is 5.", "The answer is 5."),
        ("carry the one</think>\n\nThe answer is 5.", "The answer is 5."),
        ("<think>still thinking when the budget ran out", ""),
        ("<THINKING>a</THINKING>b<reasoning>c</reasoning>d", "bd"),
    ],
)
def test_strip_reasoning_keeps_only_the_visible_answer(raw, visible):
    assert strip_reasoning(raw) == visible
