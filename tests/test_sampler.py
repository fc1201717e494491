"""The per-row seeded sampler draws from the right distribution, whatever the batch around a row."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from userturn.backends.transformers_backend import _RowSampler  # noqa: E402


def _frequencies(logits, temperature: float, top_p: float, rows: int = 4000) -> torch.Tensor:
    sampler = _RowSampler([temperature] * rows, [top_p] * rows, list(range(rows)), "cpu")
    tokens = sampler(logits.expand(rows, -1).clone())
    return torch.bincount(tokens, minlength=logits.shape[-1]).float() / rows


def test_samples_follow_the_softmax_including_the_tail_beyond_the_candidates():
    logits = torch.linspace(0.0, -3.0, 300)  # a flat distribution: about 40 % of the mass lies past the top 64
    expected = torch.softmax(logits, dim=-1)
    tail_mass = expected[64:].sum().item()
    freq = _frequencies(logits, 1.0, 1.0)
    assert tail_mass > 0.3
    assert abs(freq[64:].sum().item() - tail_mass) < 0.03
    assert 0.5 * (freq - expected).abs().sum().item() < 0.12  # total variation, 4000 draws over 300 tokens


def test_temperature_and_top_p_shape_the_draws():
    logits = torch.tensor([2.0, 1.0, 0.5, 0.0, -1.0])
    cold = _frequencies(logits, 0.25, 1.0)
    assert cold[0] > 0.95
    nucleus = _frequencies(logits, 1.0, 0.6)
    probs = torch.softmax(logits, dim=-1)
    assert probs[0] < 0.6 < probs[0] + probs[1]  # the nucleus is the two most likely tokens
    assert nucleus[2:].sum() == 0
    assert abs(nucleus[0].item() - (probs[0] / (probs[0] + probs[1])).item()) < 0.03


def test_a_row_gets_the_same_tokens_alone_or_next_to_other_rows():
    torch.manual_seed(0)
    logits = torch.randn(6, 1000) * 3
    temperatures, top_ps, seeds = [0.0, 1.0, 0.7, 1.0, 1.3, 0.9], [1.0, 1.0, 0.9, 0.5, 1.0, 0.95], [5, 6, 7, 8, 9, 10]
    together = _RowSampler(temperatures, top_ps, seeds, "cpu")
    alone = [_RowSampler([t], [p], [s], "cpu") for t, p, s in zip(temperatures, top_ps, seeds, strict=True)]
    for _step in range(5):
        batch = together(logits.clone())
        single = torch.cat([sampler(logits[i:i + 1].clone()) for i, sampler in enumerate(alone)])
        assert torch.equal(batch, single)
    assert batch[0] == logits[0].argmax()


def test_keep_drops_rows_without_changing_the_others():
    logits = torch.randn(3, 500)
    full = _RowSampler([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], [1, 2, 3], "cpu")
    reference = _RowSampler([1.0], [1.0], [3], "cpu")
    assert full(logits.clone())[2] == reference(logits[2:].clone())[0]
    full.keep([2])
    assert full(logits[2:].clone())[0] == reference(logits[2:].clone())[0]
