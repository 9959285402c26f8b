"""Trains the small sentencepiece model shipped for the embedded CPU demo (`genenv_jax/assets/arith_spm.model`).

What: a deterministic, seeded, in-memory corpus of the default demo domain (synthetic arithmetic: env prompts such as
"Write a task of difficulty 3:", tasks such as "Compute: 12+7*3-5 =", answers such as "28", curriculum words such as
"seed", "success rate") plus general English and every printable ASCII character, fed to sentencepiece's trainer.

Why these trainer settings (sentencepiece's `doc/options.md` and `doc/normalization.md` describe them):
  * `normalization_rule_name="identity"`, `add_dummy_prefix=False`, `remove_extra_whitespaces=False`: no NFKC, no
    leading "▁" and no whitespace folding, so `decode(encode(x)) == x` exactly;
  * `byte_fallback=True`: a character the corpus never showed (unicode, "\n", "\t") becomes its UTF-8 bytes, so any
    text round-trips instead of mapping to <unk>;
  * `split_digits=True`: each digit is its own piece, so numbers have one spelling and the arithmetic verifier can read
    answers digit by digit;
  * ids pad=0, bos=1, eos=2, unk=3 (what `genenv_jax.models.tokenizer` documents for the shipped model);
  * `num_threads=1`, no input shuffling: the same seed gives the same model bytes.

Usage:  python -m genenv_jax.scripts.train_tokenizer --out genenv_jax/assets/arith_spm.model --vocab_size 512
"""

from __future__ import annotations

import io
import pathlib
import random
import string
from typing import Sequence

from absl import flags

from genenv_jax import cli

DEFAULT_OUT = pathlib.Path(__file__).resolve().parents[1] / "assets" / "arith_spm.model"

_ENGLISH = (
  "The agent learns to solve tasks, and the environment learns to write them.",
  "A task that is too easy teaches nothing; a task that is too hard teaches nothing either.",
  "The simulator writes tasks the agent solves about half of the time.",
  "Each task is a prompt plus an evaluation spec: a checker, a target or a reference answer.",
  "Please answer the question below. Show only the final answer.",
  "What is the capital of France? The capital of France is Paris.",
  "She walked to the market on Monday morning, bought bread and came home.",
  "If it rains tomorrow, we will stay inside and read a book.",
  "The quick brown fox jumps over the lazy dog.",
  "Numbers like 3.14, 2.718 and 1,000,000 appear in many texts.",
  "Why is the sky blue? Sunlight is scattered by the air.",
  "You are a helpful assistant. Think step by step, then give the answer.",
  "The reward is high when the success rate is close to one half.",
  "Call the tool with a JSON object that names the function and its arguments.",
  "Hello, world! How are you today?",
  "I don't know; let's check the result again.",
  "Error: the task could not be parsed, so it is invalid.",
  "The model was trained for 100 steps with a learning rate of 0.000001.",
  "Good tasks are clear, checkable and of the right difficulty.",
  "He said: \"It works.\" Then he wrote it down (twice) [just in case].",
  "Use a tab, a colon: a semicolon; an apostrophe's mark, and a question mark?",
  "A list: apples, oranges, pears & plums; 50% off, $5 each, #1 choice, @home.",
  "Email me at user@example.com or visit https://example.com/path?a=1&b=2.",
  "The user asks a question and the assistant replies with a short answer.",
  "Rollouts are scored, grouped, and normalized into advantages.",
  "In the end, the curriculum follows the agent as it improves.",
)

_TOOL_CALLS = (
  '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}',
  '{"name": "search", "arguments": {"query": "largest prime below 100"}}',
  '{"name": "calculator", "arguments": {"expression": "12*(3+4)"}}',
  '[{"name": "send_email", "arguments": {"to": "bob", "subject": "hi"}}]',
)

_CURRICULUM = (
  "Write a task of difficulty {d}:",
  "Write a new task of difficulty {d}. Seed task: {task}",
  "Seed task: {task}",
  "Recent success rate: {p}. Write a task of difficulty {d}:",
  "The agent's success rate on this task was {p}; the target is 0.5.",
  "seed {n}, step {m}, difficulty {d}, success rate {p}",
  "Task: {task}\nAnswer: {a}",
  "{task} {a}",
  "Answer: {a}",
  "The answer is {a}.",
  "answer = {a}",
  "Solve the task and give only the answer. {task}",
  "This task is too easy. Write a harder one, difficulty {d}:",
  "This task is too hard. Write an easier one, difficulty {d}:",
)


_PRECEDENCE = {None: 3, "*": 2, "+": 1, "-": 1}


def _expression(rng: random.Random, n_ops: int, digits: int) -> tuple[str, int, str | None]:
  """A random integer expression over + - * with `n_ops` operators, as (text, value, top operator).

  Parentheses go exactly where usual precedence needs them (and sometimes, at random, where it does not), so the
  text evaluates to `value`.
  """
  if n_ops == 0:
    value = rng.randint(0, 10**digits - 1)
    return str(value), value, None
  left_ops = rng.randint(0, n_ops - 1)
  left, lv, left_top = _expression(rng, left_ops, digits)
  right, rv, right_top = _expression(rng, n_ops - 1 - left_ops, digits)
  op = rng.choice("+-*")
  extra = rng.random() < 0.15
  if _PRECEDENCE[left_top] < _PRECEDENCE[op] or (extra and left_top is not None):
    left = f"({left})"
  if (
    _PRECEDENCE[right_top] < _PRECEDENCE[op]
    or (op == "-" and _PRECEDENCE[right_top] == 1)
    or (extra and right_top is not None)
  ):
    right = f"({right})"
  value = lv + rv if op == "+" else lv - rv if op == "-" else lv * rv
  text = f"{left} {op} {right}" if rng.random() < 0.2 else f"{left}{op}{right}"
  return text, value, op


def build_corpus(seed: int = 0, n_arith: int = 4000) -> list[str]:
  """The training sentences: arithmetic tasks and answers, curriculum prompts, English, tool calls, all ASCII.

  Deterministic in `seed`. No line contains a newline except through the "Task: ...\\nAnswer: ..." template, which is
  split into its lines (sentencepiece trains on lines; "\\n" itself is covered by byte fallback).
  """
  rng = random.Random(seed)
  lines: list[str] = []
  for _ in range(n_arith):
    difficulty = rng.randint(1, 10)
    n_ops = rng.randint(1, max(1, difficulty))
    text, value, _ = _expression(rng, n_ops, digits=1 + (difficulty - 1) // 3)
    task = f"Compute: {text} ="
    template = rng.choice(_CURRICULUM)
    filled = template.format(
      d=difficulty,
      task=task,
      a=value,
      p=f"{rng.randint(0, 100) / 100:.2f}",
      n=rng.randint(0, 9999),
      m=rng.randint(0, 999),
    )
    lines.extend(filled.split("\n"))
    lines.append(f"{task} {value}")
  for _ in range(8):
    lines.extend(_ENGLISH)
    lines.extend(_TOOL_CALLS)
  # Every printable ASCII character at least once, in a few arrangements.
  visible = string.ascii_letters + string.digits + string.punctuation
  lines.extend(
    [
      visible,
      " ".join(visible),
      string.punctuation,
      string.ascii_lowercase,
      string.ascii_uppercase,
      "0 1 2 3 4 5 6 7 8 9 + - * / ( ) = , . : ; ! ?",
    ]
  )
  return lines


def train(
  out: str | pathlib.Path = DEFAULT_OUT, vocab_size: int = 512, seed: int = 0, model_type: str = "bpe"
) -> pathlib.Path:
  """Trains the model on `build_corpus(seed)` and writes it to `out`; returns the path written."""
  import sentencepiece as spm

  if model_type not in ("bpe", "unigram"):
    raise ValueError(f"model_type must be 'bpe' or 'unigram', got {model_type!r}")
  if vocab_size < 4 + 256 + 100:
    raise ValueError(
      f"vocab_size={vocab_size} is too small: 4 special ids + 256 byte-fallback pieces + ~100 "
      "characters need at least 360; use 512"
    )
  out = pathlib.Path(out)
  if not out.parent.is_dir():
    raise FileNotFoundError(f"output directory {out.parent} does not exist; create it or pass another --out")
  buffer = io.BytesIO()
  spm.SentencePieceTrainer.train(
    sentence_iterator=iter(build_corpus(seed)),
    model_writer=buffer,
    model_type=model_type,
    vocab_size=vocab_size,
    character_coverage=1.0,
    byte_fallback=True,
    split_digits=True,
    normalization_rule_name="identity",
    add_dummy_prefix=False,
    remove_extra_whitespaces=False,
    pad_id=0,
    bos_id=1,
    eos_id=2,
    unk_id=3,
    pad_piece="<pad>",
    bos_piece="<s>",
    eos_piece="</s>",
    unk_piece="<unk>",
    num_threads=1,
    input_sentence_size=0,
    shuffle_input_sentence=False,
    minloglevel=2,
  )
  out.write_bytes(buffer.getvalue())
  return out


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  _FLAGS = (
    flags.DEFINE_string("out", str(DEFAULT_OUT), "where to write the .model file", flag_values=flag_values),
    flags.DEFINE_integer("vocab_size", 512, "pieces in the model's vocabulary", flag_values=flag_values),
    flags.DEFINE_integer(
      "seed", 0, "seeds the corpus (the same seed gives the same model bytes)", flag_values=flag_values
    ),
    flags.DEFINE_enum("model_type", "bpe", ["bpe", "unigram"], "sentencepiece's model type", flag_values=flag_values),
  )


def main(argv: Sequence[str]) -> int:
  """Trains and writes the model. Through cli.run (or cli.call): a bad flag is one `error:` line, exit status 2."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  path = train(args.out, args.vocab_size, args.seed, args.model_type)
  print(f"wrote {path} ({path.stat().st_size} bytes, vocab {args.vocab_size})")
  return 0


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.scripts.train_tokenizer")
