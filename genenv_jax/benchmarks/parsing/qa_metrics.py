"""Answer normalisation, exact match and token F1 for short-answer QA.

The rules are those of the SQuAD v1.1 official evaluate script (Rajpurkar et al., 2016, `evaluate-v1.1.py`), which
Bamboogle-style multi-hop QA evaluations reuse:

- normalise(s) = collapse_whitespace(remove_articles(remove_punctuation(lowercase(s)))), where punctuation is
  Python's `string.punctuation` and the articles are the whole words "a", "an", "the";
- EM(pred, gold) = [normalise(pred) == normalise(gold)];
- F1(pred, gold) over the whitespace tokens of the normalised strings: with c = |tokens(pred) ∩ tokens(gold)| counted
  as a multiset, P = c / |tokens(pred)|, R = c / |tokens(gold)|, F1 = 2PR / (P + R), and F1 = 0 when c = 0 (so an
  empty prediction scores 0);
- against several gold answers the metric is the maximum over them (`metric_max_over_ground_truths`).

All functions are pure and total: any string (also "") is a valid input.
"""

from __future__ import annotations

import collections
import re
import string

_PUNCTUATION = frozenset(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
  """SQuAD v1.1 normalisation: lowercase, drop punctuation, drop articles a/an/the, collapse whitespace."""
  lowered = text.lower()
  no_punct = "".join(ch for ch in lowered if ch not in _PUNCTUATION)
  no_articles = _ARTICLES.sub(" ", no_punct)
  return " ".join(no_articles.split())


def exact_match(prediction: str, gold: str) -> bool:
  """SQuAD v1.1 exact match: the normalised strings are equal."""
  return normalize_answer(prediction) == normalize_answer(gold)


def token_f1(prediction: str, gold: str) -> float:
  """SQuAD v1.1 token F1 between the normalised prediction and gold (multiset overlap; 0.0 when nothing overlaps)."""
  pred_tokens = normalize_answer(prediction).split()
  gold_tokens = normalize_answer(gold).split()
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:
    return 0.0
  precision = num_same / len(pred_tokens)
  recall = num_same / len(gold_tokens)
  return 2.0 * precision * recall / (precision + recall)
