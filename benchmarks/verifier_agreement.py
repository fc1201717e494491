"""Agreement of userturn's GSM8K and IFEval verifiers with lm-evaluation-harness on the same responses.

Usage (needs ``pip install 'userturn[agreement]'`` and the benchmark files)::

    PYTHONPATH=src python benchmarks/verifier_agreement.py --data-dir ../shared/data
    PYTHONPATH=src python benchmarks/verifier_agreement.py --data-dir ../shared/data \
        --gsm8k-responses samples.jsonl --ifeval-responses ifeval_samples.jsonl

Responses. Without response files the script builds them, deterministically (seed 0):

- GSM8K: each test item's real gold solution (calculator annotations removed) with its final line
  rewritten in one of the forms models use (``#### X``, ``The answer is $X.``, ``\\boxed{X}``,
  ``**X**``, a closing sentence, ``1,800`` commas, ``18.00``), a third of them with a wrong number
  (X+1, or X in a closing sentence followed by a stray number).
- IFEval: for each of the 541 prompts, real human prose (an OpenAssistant assistant reply) edited so
  that each instruction is followed or broken at random (commas removed, case changed, wrapped in
  quotes, a postscript or title added, cut to a word or sentence count near the limit, ...).

With ``--generate N`` it scores greedy responses of the embedded SmolLM2-135M-Instruct to the first N
items of each set (``--save-dir`` keeps them). With ``--gsm8k-responses``/``--ifeval-responses`` it
scores your JSONL instead (``response`` or
``assistant_response``, and ``id``/``item_id`` of a dataset item), e.g. a ``samples.jsonl`` of a run.

Peers: lm-eval's GSM8K ``flexible-extract`` and ``strict-match`` filters with the task's
``exact_match`` settings, and lm-eval's IFEval ``test_instruction_following_strict/loose``. NLTK's
``punkt`` data cannot be downloaded offline; the peer's sentence counter then gets NLTK's untrained
``PunktSentenceTokenizer`` (default parameters, no learned abbreviations), which is what runs here.

Prints the agreement rates and every disagreement.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
from pathlib import Path
from typing import Any

from userturn.datasets import LoadOptions, load_items
from userturn.verifiers.gsm8k import gold_number, verify_gsm8k
from userturn.verifiers.ifeval import evaluate_ifeval

# --- GSM8K ---------------------------------------------------------------------------------------


def _with_commas(number: str) -> str:
    return f"{int(number):,}" if re.fullmatch(r"\d{4,}", number) else number


def synthetic_gsm8k(items: list, rng: random.Random) -> list[dict[str, Any]]:
    """Gold solutions with the final answer rewritten in varied forms; a third carry a wrong number."""
    forms = [
        "#### {x}",
        "The answer is {x}.",
        "The answer is ${x}.",
        "So the final answer is \\boxed{{{x}}}.",
        "**{x}**",
        "Therefore, the result is {x} in total.",
        "Final Answer: The final answer is {x}. I hope it is correct.",
        "The answer is {xc}.",
        "The answer is {x}.00",
        "Answer: {x}",
    ]
    rows = []
    for item in items:
        body, _, _ = item.answer.rpartition("####")
        body = re.sub(r"<<[^>]*>>", "", body).strip()
        gold = gold_number(item.answer)
        wrong = rng.random() < 1 / 3
        shown = str(int(float(gold)) + 1) if wrong and re.fullmatch(r"-?\d+", gold) else gold
        form = rng.choice(forms)
        ending = form.format(x=shown, xc=_with_commas(shown))
        if wrong and rng.random() < 0.3:
            ending = f"The answer is {gold}. In step 2 we used {shown} items."
        rows.append({"id": item.id, "response": f"{body}\n{ending}"})
    return rows


def lm_eval_gsm8k(response: str, gold_solution: str) -> dict[str, Any]:
    """lm-eval's GSM8K filters and exact_match as configured in its gsm8k task."""
    from lm_eval.api.metrics import exact_match_hf_evaluate
    from lm_eval.filters.extraction import RegexFilter

    ignore = [",", "\\$", "(?s).*#### ", "\\.$"]
    results = {}
    for name, pattern, group in (
        ("flexible", r"(-?[$0-9.,]{2,})|(-?[0-9]+)", -1),
        ("strict", r"#### (\-?[0-9\.\,]+)", 0),
    ):
        extracted = list(RegexFilter(regex_pattern=pattern, group_select=group).apply([[response]], [{}]))[0][0]
        score = exact_match_hf_evaluate([extracted], [gold_solution], regexes_to_ignore=ignore, ignore_case=True)
        results[name] = (extracted, bool(score["exact_match"]))
    return results


def gsm8k_reason(ours, peer_extracted: str) -> str:
    """Why userturn and lm-eval's flexible-extract disagree on one response."""
    from userturn.verifiers.numeric import normalize_number

    peer_value = normalize_number(peer_extracted)
    if ours.correct and peer_value is not None and str(peer_value) == ours.details["gold"]:
        return "same value written differently (18.00 vs 18): lm-eval compares strings"
    if ours.details["rule"] in ("####", "boxed", "answer phrase"):
        return f"stated answer ({ours.details['rule']}) then a later number: lm-eval takes the last number"
    return "other"


def gsm8k_agreement(items: dict, rows: list[dict[str, Any]]) -> None:
    disagreements = {"flexible": [], "strict": []}
    for row in rows:
        item = items[str(row["id"])]
        response = row.get("response", row.get("assistant_response", ""))
        ours = verify_gsm8k(response, item.answer)
        peer = lm_eval_gsm8k(response, item.answer)
        for name in disagreements:
            if ours.correct != peer[name][1]:
                disagreements[name].append((item.id, ours, peer[name], response))
    n = len(rows)
    print(f"\n== GSM8K: {n} responses ==")
    for name, found in disagreements.items():
        print(f"agreement with lm-eval {name}-extract on correct/incorrect: {(n - len(found)) / n:.4f} "
              f"({n - len(found)}/{n}), {len(found)} disagreements")
    reasons: dict[str, int] = {}
    for _, ours, (extracted, _), _ in disagreements["flexible"]:
        reason = gsm8k_reason(ours, extracted)
        reasons[reason] = reasons.get(reason, 0) + 1
    for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
        print(f"  {count:4d}  {reason}")
    print("\n-- every disagreement with flexible-extract (id, userturn, lm-eval, last 160 chars) --")
    for item_id, ours, (extracted, correct), response in disagreements["flexible"]:
        tail = response[-160:].replace("\n", "\\n")
        print(f"[{item_id}] {gsm8k_reason(ours, extracted)}: userturn={ours.correct} ({ours.extracted}, {ours.details['rule']}) "
              f"lm-eval={correct} ({extracted!r}) gold={ours.details['gold']} :: ...{tail}")


# --- IFEval --------------------------------------------------------------------------------------

FILLER = ["The river runs north past the old mill.", "Mr. Lee said the plan, in short, was simple.",
          "We met at 5 p.m. and talked about 3.5 ideas.", "Honestly, it worked better than expected!",
          "Would you like to hear more?"]


def _follow(instruction_id: str, kwargs: dict, text: str, prompt: str, rng: random.Random) -> str:
    """Edit ``text`` so that it (most likely) follows ``instruction_id``."""
    k = {key: value for key, value in kwargs.items() if value is not None}
    relation_below = k.get("relation") == "less than"
    if instruction_id == "punctuation:no_comma":
        return text.replace(",", "")
    if instruction_id == "change_case:english_capital":
        return text.upper()
    if instruction_id == "change_case:english_lowercase":
        return text.lower()
    if instruction_id == "startend:quotation":
        return f'"{text}"'
    if instruction_id == "detectable_content:postscript":
        return f"{text}\n\n{k['postscript_marker']} Thanks for reading."
    if instruction_id == "detectable_format:title":
        return f"<<A Short Title>>\n\n{text}"
    if instruction_id == "detectable_format:json_format":
        return "```json\n" + json.dumps({"answer": text}) + "\n```"
    if instruction_id == "combination:repeat_prompt":
        return f"{k['prompt_to_repeat']}\n{text}"
    if instruction_id == "startend:end_checker":
        return f"{text} {k['end_phrase']}"
    if instruction_id == "detectable_format:constrained_response":
        return f"{text}\nMy answer is {rng.choice(['yes', 'no', 'maybe'])}."
    if instruction_id == "combination:two_responses":
        return f"{text}\n******\n{rng.choice(FILLER)}"
    if instruction_id == "detectable_format:number_bullet_lists":
        return "\n".join(f"* {rng.choice(FILLER)}" for _ in range(k["num_bullets"]))
    if instruction_id == "detectable_format:number_highlighted_sections":
        return text + "".join(f"\n*highlight {i}*" for i in range(k["num_highlights"]))
    if instruction_id == "detectable_format:multiple_sections":
        return "\n".join(f"{k['section_spliter']} {i + 1}\n{rng.choice(FILLER)}" for i in range(k["num_sections"]))
    if instruction_id == "detectable_content:number_placeholders":
        return text + " " + " ".join(f"[place {i}]" for i in range(k["num_placeholders"]))
    if instruction_id == "length_constraints:number_paragraphs":
        return "\n***\n".join(rng.choice(FILLER) for _ in range(k["num_paragraphs"]))
    if instruction_id == "length_constraints:nth_paragraph_first_word":
        paragraphs = [rng.choice(FILLER) for _ in range(k["num_paragraphs"])]
        paragraphs[k["nth_paragraph"] - 1] = f"{k['first_word'].capitalize()} {paragraphs[k['nth_paragraph'] - 1]}"
        return "\n\n".join(paragraphs)
    if instruction_id == "keywords:existence":
        return text + " " + " ".join(k["keywords"]) + "."
    if instruction_id == "keywords:frequency":
        times = k["frequency"] - 1 if relation_below else k["frequency"] + rng.choice([0, 1])
        return text + " " + " ".join([k["keyword"]] * max(times, 0))
    if instruction_id == "length_constraints:number_words":
        words = text.split()
        limit = k["num_words"] + (-rng.randint(1, 3) if relation_below else rng.randint(0, 3))
        while len(words) < limit:
            words += rng.choice(FILLER).split()
        return " ".join(words[: max(limit, 1)])
    if instruction_id == "length_constraints:number_sentences":
        # Real prose sentences (split at ". " etc.), so neither splitter is favoured by the filler.
        target = k["num_sentences"] + (-1 if relation_below else rng.randint(0, 2))
        pieces = [p for p in re.split(r"(?<=[.!?])\s+", text) if p.strip()]
        while len(pieces) < target:
            pieces += pieces
        return " ".join(pieces[: max(target, 1)])
    return text  # forbidden words, letter frequency, language, capital word frequency: leave to chance


def synthetic_ifeval(items: list, texts: list[str], rng: random.Random) -> list[dict[str, Any]]:
    rows = []
    for item in items:
        text = rng.choice(texts)
        for instruction_id, kwargs in zip(item.meta["instruction_id_list"], item.meta["kwargs"], strict=True):
            if rng.random() < 0.6:
                text = _follow(instruction_id, kwargs, text, item.query, rng)
        if rng.random() < 0.2:
            text = "Sure! Here is my response:\n" + text
        rows.append({"id": item.id, "response": text})
    return rows


def lm_eval_ifeval(item, response: str) -> tuple[list[bool], list[bool]]:
    from lm_eval.tasks.ifeval import utils

    example = utils.InputExample(key=int(item.id), instruction_id_list=item.meta["instruction_id_list"],
                                 prompt=item.query, kwargs=item.meta["kwargs"])
    strict = utils.test_instruction_following_strict(example, response).follow_instruction_list
    loose = utils.test_instruction_following_loose(example, response).follow_instruction_list
    return strict, loose


def _patch_peer_sentence_tokenizer() -> str:
    import nltk
    from lm_eval.tasks.ifeval import instructions_util

    try:
        nltk.data.find("tokenizers/punkt_tab/english/")
        return "punkt (english)"
    except LookupError:
        from nltk.tokenize import NLTKWordTokenizer
        from nltk.tokenize.punkt import PunktSentenceTokenizer

        untrained = PunktSentenceTokenizer()
        words = NLTKWordTokenizer()
        instructions_util._get_sentence_tokenizer = lambda: untrained
        # nltk.word_tokenize (capital_word_frequency) also needs punkt: same sentences, Treebank words.
        instructions_util.nltk.word_tokenize = lambda text, language="english", preserve_line=False: [
            token for sentence in untrained.tokenize(text) for token in words.tokenize(sentence)]
        return "untrained PunktSentenceTokenizer (punkt data not available offline)"


def ifeval_agreement(items: dict, rows: list[dict[str, Any]]) -> None:
    import langdetect

    tokenizer = _patch_peer_sentence_tokenizer()
    langdetect.DetectorFactory.seed = 0
    totals = {"ours_strict": 0, "peer_strict": 0, "ours_loose": 0, "peer_loose": 0, "n": 0,
              "ours_prompt": 0, "peer_prompt": 0}
    disagreements = []
    per_type: dict[str, list[int]] = {}
    for row in rows:
        item = items[str(row["id"])]
        response = row.get("response", row.get("assistant_response", ""))
        ours = evaluate_ifeval(response, item.meta["instruction_id_list"], item.meta["kwargs"], item.query)
        peer_strict, peer_loose = lm_eval_ifeval(item, response)
        totals["ours_prompt"] += ours.prompt_strict
        totals["peer_prompt"] += all(peer_strict)
        for index, instruction_id in enumerate(ours.instruction_ids):
            totals["n"] += 1
            totals["ours_strict"] += ours.strict[index]
            totals["peer_strict"] += peer_strict[index]
            totals["ours_loose"] += ours.loose[index]
            totals["peer_loose"] += peer_loose[index]
            same = ours.strict[index] == peer_strict[index] and ours.loose[index] == peer_loose[index]
            per_type.setdefault(instruction_id, [0, 0])[0] += same
            per_type[instruction_id][1] += 1
            if not same:
                disagreements.append((item.id, instruction_id, item.meta["kwargs"][index], ours.strict[index],
                                      peer_strict[index], ours.loose[index], peer_loose[index], response))
    n, prompts = totals["n"], len(rows)
    print(f"\n== IFEval: {prompts} responses, {n} instructions; peer sentence splitter: {tokenizer} ==")
    print(f"instruction-level strict: userturn {totals['ours_strict'] / n:.4f}  lm-eval {totals['peer_strict'] / n:.4f}"
          f"  diff {100 * (totals['ours_strict'] - totals['peer_strict']) / n:+.2f} points")
    print(f"instruction-level loose:  userturn {totals['ours_loose'] / n:.4f}  lm-eval {totals['peer_loose'] / n:.4f}"
          f"  diff {100 * (totals['ours_loose'] - totals['peer_loose']) / n:+.2f} points")
    print(f"prompt-level strict:      userturn {totals['ours_prompt'] / prompts:.4f}  "
          f"lm-eval {totals['peer_prompt'] / prompts:.4f}")
    print(f"per-instruction agreement (strict and loose both equal): {(n - len(disagreements)) / n:.4f} "
          f"({n - len(disagreements)}/{n})")
    for instruction_id, (same, count) in sorted(per_type.items()):
        if same != count:
            print(f"  {instruction_id}: {same}/{count}")
    print("\n-- every disagreement (item, instruction, kwargs, strict ours/peer, loose ours/peer, response start) --")
    for item_id, instruction_id, kwargs, os_, ps, ol, pl, response in disagreements:
        shown = response[:200].replace("\n", "\\n")
        args = {key: value for key, value in kwargs.items() if value is not None}
        print(f"[{item_id}] {instruction_id} {args} strict {os_}/{ps} loose {ol}/{pl} :: {shown}")


def generate_rows(items: list, count: int, save: Path | None, max_tokens: int) -> list[dict[str, Any]]:
    """Greedy responses of the embedded model (SmolLM2-135M-Instruct) to the first ``count`` items."""
    from userturn.backends import load_backend
    from userturn.records import GenerationRequest, SamplingParams
    from userturn.templates import render_assistant_prompt

    backend = load_backend("transformers", "embedded")
    params = SamplingParams(temperature=0.0, max_tokens=max_tokens)
    chosen = items[:count]
    requests = [GenerationRequest(render_assistant_prompt(backend.tokenizer, item.messages), params) for item in chosen]
    completions = backend.generate(requests)
    rows = [{"id": item.id, "response": out[0].text} for item, out in zip(chosen, completions, strict=True)]
    if save is not None:
        save.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return rows


def _read_rows(path: Path) -> list[dict[str, Any]]:
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            row.setdefault("id", row.get("item_id"))
            rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, required=True, help="folder with gsm8k/, ifeval/, oasst1_en/")
    parser.add_argument("--gsm8k-responses", type=Path, help="JSONL of GSM8K responses (id + response)")
    parser.add_argument("--ifeval-responses", type=Path, help="JSONL of IFEval responses (id + response)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--generate", type=int, default=0, metavar="N",
                        help="score greedy responses of the embedded model to the first N items of each set instead")
    parser.add_argument("--max-tokens", type=int, default=320, help="token limit for --generate")
    parser.add_argument("--save-dir", type=Path, help="write the generated responses here (gsm8k.jsonl, ifeval.jsonl)")
    args = parser.parse_args(argv)
    options = LoadOptions(data_dir=args.data_dir)
    rng = random.Random(args.seed)

    gsm8k_items = load_items("gsm8k", options)
    save = args.save_dir
    if save is not None:
        save.mkdir(parents=True, exist_ok=True)
    if args.gsm8k_responses:
        gsm8k_rows = _read_rows(args.gsm8k_responses)
    elif args.generate:
        gsm8k_rows = generate_rows(gsm8k_items, args.generate, save and save / "gsm8k.jsonl", args.max_tokens)
    else:
        gsm8k_rows = synthetic_gsm8k(gsm8k_items, rng)
    gsm8k_agreement({item.id: item for item in gsm8k_items}, gsm8k_rows)

    ifeval_items = load_items("ifeval", options)
    if args.ifeval_responses:
        ifeval_rows = _read_rows(args.ifeval_responses)
    elif args.generate:
        ifeval_rows = generate_rows(ifeval_items, args.generate, save and save / "ifeval.jsonl", args.max_tokens)
    else:
        texts = [item.given_response for item in load_items("conversations", options)
                 if item.given_response and len(item.given_response) > 200]
        ifeval_rows = synthetic_ifeval(ifeval_items, texts, rng)
    ifeval_agreement({item.id: item for item in ifeval_items}, ifeval_rows)


if __name__ == "__main__":
    sys.exit(main())
