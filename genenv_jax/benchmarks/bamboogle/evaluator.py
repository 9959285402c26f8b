"""Bamboogle (Press et al., 2023, "Measuring and Narrowing the Compositionality Gap"): 125 two-hop questions.

Data: `<data_dir>/bamboogle/data.json`, a JSON list of `{"Question", "Answer"}` (the copy in qiancheng0/ToolRL). One
split, "test"; item ids are `bamboogle-{i}` in file order.

Scoring (SQuAD v1.1 rules, see `qa_metrics`): the answer is extracted from the model output by `extract_answer`, then
`correct` = exact match after normalisation and `score` = token F1 against the gold answer.

Answer extraction, in order of precedence:
1. the content of the last `<answer>...</answer>` tag (case-insensitive; an unclosed final `<answer>` takes the rest of
   the output, so generation stopped at the `</answer>` stop string still counts);
2. otherwise, with `<result>...</result>` tool blocks removed, the last line of the form `Answer: ...` (also
   `Final answer: ...`);
3. otherwise the last non-empty line.
An output with no extractable text scores 0 (never raises).

Search tool (optional): with a `search_fn(query) -> str`, the prompt tells the model it may write
`<search>query</search>`; `run_search_loop` stops the turn there, calls `search_fn(query)` and returns its text to the
model as a user turn `<result>...</result>`, up to `max_search_turns` times, and the final reply must hold the
`<answer>` tag. Closed-book (no search) is the default.

NOT COMPARABLE TO THE PAPER: the protocol GenEnv follows used live web search and a GPT-4o judge of answer
correctness. Neither runs offline, so these scores (closed-book or with a local/simulated search tool, EM/F1) are not
comparable to the paper's Bamboogle numbers; `aggregate` says so with the flag `not_comparable_to_paper = 1.0`.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import re
from typing import Callable, Sequence

from genenv_jax.benchmarks.parsing import qa_metrics
from genenv_jax.benchmarks.parsing.source_scan import remove_tag_blocks, tag_contents, tag_spans
from genenv_jax.tasks.benchmark import EvalItem, ItemResult, Message

SearchFn = Callable[[str], str]
GenerateFn = Callable[[Sequence[Message]], str]

NOTE = (
  "Bamboogle scores here are closed-book (or local-search) SQuAD EM/F1; GenEnv's protocol used live web search "
  "and a GPT-4o judge, so they are not comparable to the paper's numbers."
)
SPLIT = "test"
DATA_FILE = ("bamboogle", "data.json")

SYSTEM_PROMPT_CLOSED_BOOK = (
  "Answer the question. You may think briefly first; then give only the final short answer (a name, date, number "
  "or short phrase) between <answer> and </answer>, for example <answer>Paris</answer>."
)
SYSTEM_PROMPT_SEARCH = (
  "Answer the question. You may search the web: write <search>your query</search> and stop; the search results "
  "will be returned to you between <result> and </result>. You may search several times. When you know the "
  "answer, give only the final short answer (a name, date, number or short phrase) between <answer> and </answer>, "
  "for example <answer>Paris</answer>."
)

_ANSWER_OPEN = re.compile(r"<answer>", re.IGNORECASE)
# `[ \t]*`, not `\s*`, around the line: with MULTILINE, a leading `\s*` would run over every following blank line at
# each line start (quadratic on a flood of newlines).
_ANSWER_LINE = re.compile(r"^[ \t]*(?:final\s+)?answer[ \t]*[:：]\s*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE)


def _clean(text: str) -> str | None:
  """Strips whitespace and surrounding markdown emphasis; None when nothing is left."""
  cleaned = text.strip().strip("*_`").strip()
  return cleaned or None


def extract_answer(output: str) -> str | None:
  """The model's final answer by the module's rules (answer tag > `Answer:` line > last line), or None."""
  if not isinstance(output, str) or not output.strip():
    return None
  tagged = tag_contents(output, "<answer>", "</answer>", ignore_case=True)
  last_open = [m.end() for m in _ANSWER_OPEN.finditer(output)]
  if last_open and "</answer>" not in output[last_open[-1] :].lower():
    return _clean(output[last_open[-1] :])
  if tagged:
    return _clean(tagged[-1])
  text = remove_tag_blocks(output, "<result>", "</result>", ignore_case=True, to_end=True, replacement="\n")
  lines = _ANSWER_LINE.findall(text)
  if lines:
    return _clean(lines[-1])
  non_empty = [line for line in text.splitlines() if line.strip()]
  return _clean(non_empty[-1]) if non_empty else None


def _search_span(reply: str) -> tuple[int, int, int, int] | None:
  spans = tag_spans(reply, "<search>", "</search>", ignore_case=True)
  return spans[0] if spans else None


def extract_search_query(reply: str) -> str | None:
  """The query of the first `<search>...</search>` in a reply that has no `<answer>` before it, else None."""
  span = _search_span(reply)
  if span is None:
    return None
  answer = _ANSWER_OPEN.search(reply, 0, span[0])
  if answer is not None:
    return None
  query = reply[span[1] : span[2]].strip()
  return query or None


def run_search_loop(
  generate_fn: GenerateFn, messages: Sequence[Message], search_fn: SearchFn, max_search_turns: int = 4
) -> str:
  """Multi-turn search protocol: reply, and while it asks `<search>q</search>`, answer with `<result>...</result>`.

  Each searching reply is cut right after its `</search>`; the tool's text goes back as a user turn. After
  `max_search_turns` searches the next reply is final whatever it holds. Returns the assistant turns joined by
  newlines (the text that `score` reads; the `<result>` blocks are not part of it).
  """
  if max_search_turns < 0:
    raise ValueError(f"max_search_turns must be >= 0, got {max_search_turns}")
  history: list[Message] = list(messages)
  turns: list[str] = []
  for turn in range(max_search_turns + 1):
    reply = generate_fn(tuple(history))
    query = extract_search_query(reply) if turn < max_search_turns else None
    if query is None:
      turns.append(reply)
      break
    cut = reply[: _search_span(reply)[3]]
    turns.append(cut)
    result = search_fn(query)
    history += [{"role": "assistant", "content": cut}, {"role": "user", "content": f"<result>{result}</result>"}]
  return "\n".join(turns)


def _mean(values: Sequence[float]) -> float:
  return float(sum(values) / len(values)) if values else 0.0


@dataclasses.dataclass(frozen=True)
class BamboogleBenchmark:
  """Bamboogle as a `Benchmark`: EM (correct) and F1 (score), closed-book unless `search_fn` is given."""

  search_fn: SearchFn | None = None
  max_search_turns: int = 4
  name: str = dataclasses.field(default="bamboogle", init=False)

  def splits(self) -> Sequence[str]:
    return (SPLIT,)

  def system_prompt(self) -> str:
    return SYSTEM_PROMPT_CLOSED_BOOK if self.search_fn is None else SYSTEM_PROMPT_SEARCH

  def load_items(self, data_dir: str, split: str | None = None, limit: int | None = None) -> list[EvalItem]:
    """Reads `<data_dir>/bamboogle/data.json`; raises ValueError naming a bad split or limit or a malformed record."""
    if split is not None and split != SPLIT:
      raise ValueError(f"bamboogle has no split {split!r}; its only split is {SPLIT!r}")
    if limit is not None and limit < 0:
      raise ValueError(f"limit must be >= 0 or None, got {limit}")
    path = pathlib.Path(data_dir).joinpath(*DATA_FILE)
    if not path.is_file():
      raise FileNotFoundError(f"Bamboogle data not found at {path}")
    records = json.loads(path.read_text(encoding="utf-8"))
    items = []
    for i, record in enumerate(records[:limit] if limit is not None else records):
      if (
        not isinstance(record, dict)
        or not isinstance(record.get("Question"), str)
        or not isinstance(record.get("Answer"), str)
      ):
        raise ValueError(f"{path}: record {i} lacks string 'Question'/'Answer' fields: {record!r}")
      messages = (
        {"role": "system", "content": self.system_prompt()},
        {"role": "user", "content": f"Question: {record['Question'].strip()}"},
      )
      items.append(EvalItem(id=f"bamboogle-{i}", split=SPLIT, messages=messages, gold=record["Answer"].strip()))
    return items

  def respond(self, generate_fn: GenerateFn, item: EvalItem) -> str:
    """The model's full output for an item: one reply closed-book, else the `run_search_loop` transcript."""
    if self.search_fn is None:
      return generate_fn(item.messages)
    return run_search_loop(generate_fn, item.messages, self.search_fn, self.max_search_turns)

  def score(self, item: EvalItem, output: str) -> ItemResult:
    """EM (correct) and token F1 (score) of the extracted answer against the gold answer; no answer scores 0."""
    prediction = extract_answer(output) if isinstance(output, str) else None
    gold = str(item.gold)
    if prediction is None:
      return ItemResult(item.id, item.split, False, 0.0, {"prediction": None, "gold": gold})
    em = qa_metrics.exact_match(prediction, gold)
    f1 = qa_metrics.token_f1(prediction, gold)
    return ItemResult(item.id, item.split, em, f1, {"prediction": prediction, "gold": gold})

  def oracle_output(self, item: EvalItem) -> str:
    return f"<answer>{item.gold}</answer>"

  def aggregate(self, results: Sequence[ItemResult]) -> dict[str, float]:
    """Mean EM and F1 per split and overall, plus `closed_book` and `not_comparable_to_paper` flags (see NOTE)."""
    metrics: dict[str, float] = {}
    for split in sorted({r.split for r in results}):
      chosen = [r for r in results if r.split == split]
      metrics[f"{split}/em"] = _mean([float(r.correct) for r in chosen])
      metrics[f"{split}/f1"] = _mean([r.score for r in chosen])
      metrics[f"{split}/n"] = float(len(chosen))
    metrics["em"] = _mean([float(r.correct) for r in results])
    metrics["f1"] = _mean([r.score for r in results])
    metrics["n"] = float(len(results))
    metrics["closed_book"] = 1.0 if self.search_fn is None else 0.0
    metrics["not_comparable_to_paper"] = 1.0
    return metrics
