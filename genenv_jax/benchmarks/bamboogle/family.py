"""Closed-book short-answer QA as a training task family, scored like Bamboogle (the "bamboogle" training domain).

Bamboogle's 125 questions are the evaluation set, so they are never seeds. No other QA data is among the datasets
(genenv_jax/data);
the seeds are one- and two-hop factual questions written from the TravelPlanner sandbox tables
(`travelplanner/database`: restaurants, attractions, the city -> state list), a training-side source disjoint from
Bamboogle:
  "In which state is the city of {city}?"                                   -> state   (one hop)
  "In which city is the attraction {attraction}?"                           -> city    (one hop)
  "In which state is the city where the restaurant {restaurant} is located?" -> state   (two hops)
  "In which state is the city that has the attraction {attraction}?"        -> state   (two hops)
(only names that occur once in their table, so every answer is unique).

Env text format (what the env writes, two lines):
  Question: <question>
  Answer: <short answer>

Parser rule (`parse`): exactly those two lines; the question has 4..40 words, one line, ends with "?"; the answer
has 1..8 words and at most 80 characters, a non-empty SQuAD-normalised form (`qa_metrics.normalize_answer`), and
does not occur inside the normalised question (a question that gives its answer away is rejected). The domain cannot
check a free-form answer against the world; these checks keep out malformed and leaking tasks.
Difficulty: the number of question words among which/where/what/who/whose/when/that/how (>= 1), a proxy for hops.

Agent prompt: Bamboogle's closed-book system prompt and "Question: ..." (as `BamboogleBenchmark.load_items`).
Score: `BamboogleBenchmark.score(...).score`, i.e. SQuAD token F1 of the extracted answer (`<answer>` tag first);
success when F1 >= the domain's success_threshold. Gold text: the answer.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
import re

from genenv_jax.benchmarks.bamboogle.evaluator import SPLIT, SYSTEM_PROMPT_CLOSED_BOOK, BamboogleBenchmark
from genenv_jax.benchmarks.parsing import qa_metrics
from genenv_jax.benchmarks.travelplanner.database import load_database
from genenv_jax.tasks.benchmark import EvalItem
from genenv_jax.tasks.text_domain import ParsedTask

_FORMAT = re.compile(r"\AQuestion: ([^\n]+)\nAnswer: ([^\n]+)\Z")
_WH = frozenset(("which", "where", "what", "who", "whose", "when", "that", "how"))
_SCORER = BamboogleBenchmark()


def write_task(question: str, answer: str) -> str:
  return f"Question: {question}\nAnswer: {answer}"


def _unique(names: list[str]) -> set[str]:
  counts = collections.Counter(names)
  return {n for n, c in counts.items() if c == 1 and "\n" not in n and len(n.split()) <= 8}


@dataclasses.dataclass(frozen=True)
class QaTasks:
  """The closed-book QA family (module docstring)."""

  name: str = "bamboogle"
  env_instruction: str = (
    "You write closed-book quiz questions for a student. Write exactly two lines, "
    "'Question: ...?' and 'Answer: ...' (a short answer of at most 8 words that the question "
    "does not give away), and nothing else."
  )

  def seed_texts(self, data_dir: pathlib.Path) -> list[str]:
    db = load_database(data_dir)
    out = [write_task(f"In which state is the city of {city}?", state) for city, state in db.city_states.items()]
    restaurants = [r for rows in db.restaurants.values() for r in rows]
    attractions = [a for rows in db.attractions.values() for a in rows]
    unique_r = _unique([r.name for r in restaurants])
    unique_a = _unique([a.name for a in attractions])
    for a in attractions:
      state = db.city_states.get(a.city)
      if a.name in unique_a:
        out.append(write_task(f"In which city is the attraction {a.name}?", a.city))
        if state:
          out.append(write_task(f"In which state is the city that has the attraction {a.name}?", state))
    for r in restaurants:
      state = db.city_states.get(r.city)
      if r.name in unique_r and state:
        out.append(write_task(f"In which state is the city where the restaurant {r.name} is located?", state))
    bamboogle = {
      qa_metrics.normalize_answer(i.messages[-1]["content"].removeprefix("Question: "))
      for i in _SCORER.load_items(str(data_dir))
    }
    return [t for t in out if qa_metrics.normalize_answer(t.split("\n")[0][len("Question: ") :]) not in bamboogle]

  def parse(self, text: str) -> ParsedTask | None:
    match = _FORMAT.match(text.strip()) if isinstance(text, str) else None
    if match is None:
      return None
    question, answer = match.group(1).strip(), match.group(2).strip()
    words = question.split()
    if not 4 <= len(words) <= 40 or not question.endswith("?"):
      return None
    normalized = qa_metrics.normalize_answer(answer)
    if not 1 <= len(answer.split()) <= 8 or len(answer) > 80 or not normalized:
      return None
    if f" {normalized} " in f" {qa_metrics.normalize_answer(question)} ":
      return None
    hops = sum(w.strip("?,.").lower() in _WH for w in words)
    messages = (
      {"role": "system", "content": SYSTEM_PROMPT_CLOSED_BOOK},
      {"role": "user", "content": f"Question: {question}"},
    )
    return ParsedTask(messages, answer, float(max(hops, 1)))

  def oracle(self, gold: str) -> str | None:
    return _SCORER.oracle_output(EvalItem("oracle", SPLIT, (), gold))

  def score(self, gold: str, output: str) -> float:
    return _SCORER.score(EvalItem("generated", SPLIT, (), gold), output).score
