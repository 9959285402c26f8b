"""Agents for `genenv_jax.evaluate`: the two reference agents and the model agent (our own sampler).

An agent turns a batch of `EvalItem`s into one `Reply` per item. The reference agents check an evaluator: the oracle
replies `benchmark.oracle_output(item)` (must score 100%), the null agent replies "" (must score 0%, BFCL irrelevance
excepted). The model agent runs a flax.nnx `Transformer`:

  messages -> tokenizer.apply_chat_template (with the generation prompt) -> token ids (bos prepended when the
  tokenizer has one and the template did not write it) -> left-padded [batch_size, T] batch -> `gj.generate`
  (greedy at temperature 0) -> each row's generated tokens decoded up to the first EOS, special tokens dropped.

Static shapes: every call is padded to `batch_size` rows (a short last batch repeats its first prompt), and the
sampler pads T to a length bucket, so a whole evaluation compiles a handful of programs.

Prompts longer than the budget (`max_prompt_tokens`, default and maximum: the model's context length minus
`max_new_tokens`): with overlong="truncate" (the default) the prompt keeps its last `max_prompt_tokens` tokens (cut
from the left, so the generation prompt survives; the reply says `truncated`); with overlong="skip" the item is not
generated and gets the empty reply (`skipped`). Either way the item stays in the benchmark's denominator.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import zlib
from typing import Any, Callable, Protocol, Sequence

import jax
import numpy as np

from genenv_jax.models.tokenizer import Tokenizer, load_tokenizer
from genenv_jax.models.transformer import Transformer
from genenv_jax.sampling.sampler import generate
from genenv_jax.tasks.benchmark import Benchmark, EvalItem, Message

REFERENCE_AGENTS = ("oracle", "null")
OVERLONG = ("truncate", "skip")
_TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


@dataclasses.dataclass(frozen=True)
class Reply:
  """One agent output, with what happened to its prompt (model agent only)."""

  text: str
  prompt_tokens: int = 0
  new_tokens: int = 0
  truncated: bool = False
  skipped: bool = False


class Agent(Protocol):
  """What `genenv_jax.evaluate` runs: one reply per item, in order."""

  name: str

  def respond(self, items: Sequence[EvalItem]) -> list[Reply]:
    """Replies to each item."""


@dataclasses.dataclass(frozen=True)
class OracleAgent:
  """Replies with the benchmark's oracle output (what the gold answer would produce)."""

  benchmark: Benchmark
  name: str = "oracle"

  def respond(self, items: Sequence[EvalItem]) -> list[Reply]:
    return [Reply(self.benchmark.oracle_output(item)) for item in items]


@dataclasses.dataclass(frozen=True)
class NullAgent:
  """Replies with the empty string."""

  name: str = "null"

  def respond(self, items: Sequence[EvalItem]) -> list[Reply]:
    return [Reply("") for _ in items]


def reference_agent(name: str, benchmark: Benchmark) -> Agent:
  """The reference agent called `name` ("oracle" or "null")."""
  if name == "oracle":
    return OracleAgent(benchmark)
  if name == "null":
    return NullAgent()
  raise ValueError(f"unknown reference agent {name!r}; choose one of {REFERENCE_AGENTS}")


@dataclasses.dataclass(frozen=True)
class GenerationSettings:
  """Decoding and batching settings of the model agent (see the module docstring for `overlong`)."""

  max_new_tokens: int = 512
  temperature: float = 0.0
  top_k: int = 0
  top_p: float = 1.0
  batch_size: int = 8
  max_prompt_tokens: int | None = None
  overlong: str = "truncate"
  seed: int = 0

  def __post_init__(self):
    if self.max_new_tokens < 1:
      raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
    if self.batch_size < 1:
      raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
    if self.max_prompt_tokens is not None and self.max_prompt_tokens < 1:
      raise ValueError(f"max_prompt_tokens must be >= 1, got {self.max_prompt_tokens}")
    if self.overlong not in OVERLONG:
      raise ValueError(f"overlong must be one of {OVERLONG}, got {self.overlong!r}")
    if self.temperature < 0:
      raise ValueError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")


class ModelAgent:
  """A `Transformer` and its tokenizer behind the `Agent` interface (see the module docstring)."""

  name = "model"

  def __init__(self, model: Transformer, tokenizer: Tokenizer, settings: GenerationSettings):
    if model.config.vocab_size < tokenizer.vocab_size:
      raise ValueError(
        f"the model's vocabulary ({model.config.vocab_size}) is smaller than the tokenizer's "
        f"({tokenizer.vocab_size}, {tokenizer.path}); pass the tokenizer the model was trained with"
      )
    context = int(model.config.max_position_embeddings)
    budget = context - settings.max_new_tokens
    if budget < 1:
      raise ValueError(
        f"max_new_tokens={settings.max_new_tokens} leaves no room for a prompt in the model's "
        f"context of {context} tokens; lower --max_new_tokens"
      )
    if settings.max_prompt_tokens is not None and settings.max_prompt_tokens > budget:
      raise ValueError(
        f"max_prompt_tokens={settings.max_prompt_tokens} + max_new_tokens={settings.max_new_tokens} "
        f"exceeds the model's context of {context} tokens; lower --max_prompt_tokens to <= {budget}"
      )
    self.model = model
    self.tokenizer = tokenizer
    self.settings = settings
    self.prompt_budget = settings.max_prompt_tokens or budget

  def _prompt_ids(self, conversations: Sequence[Sequence[Message]]) -> list[list[int]]:
    """Chat-templated token ids of each conversation, bos first when the tokenizer has one."""
    texts = [self.tokenizer.apply_chat_template(c, add_generation_prompt=True) for c in conversations]
    bos = self.tokenizer.bos_id
    return [
      [bos, *ids] if bos is not None and (not ids or ids[0] != bos) else ids
      for ids in self.tokenizer.encode_batch(texts)
    ]

  def _chunk(self, rows: list[list[int]]) -> list[tuple[str, int]]:
    """Generates for at most batch_size prompt rows; returns (text, new tokens) per row.

    The sampling key is `seed` folded with a hash of the rows, so a batch's samples depend on its prompts only.
    """
    s = self.settings
    width = max(len(r) for r in rows)
    ids = np.full((s.batch_size, width), self.tokenizer.pad_id, np.int32)
    mask = np.zeros((s.batch_size, width), np.int32)
    for b in range(s.batch_size):
      row = rows[b] if b < len(rows) else rows[0]  # filler rows repeat the first prompt (static batch size)
      ids[b, width - len(row) :] = row
      mask[b, width - len(row) :] = 1
    key = jax.random.fold_in(jax.random.key(s.seed), zlib.crc32(ids.tobytes()) & 0x7FFFFFFF)
    out = generate(
      self.model,
      ids,
      mask,
      max_new_tokens=s.max_new_tokens,
      temperature=s.temperature,
      top_k=s.top_k,
      top_p=s.top_p,
      eos_ids=self.tokenizer.eos_ids,
      pad_id=self.tokenizer.pad_id,
      key=key,
      vocab_limit=self.tokenizer.vocab_size,  # never an id of the embedding's padding, which decode would reject
    )
    tokens, gen_mask = np.asarray(out.tokens), np.asarray(out.mask)
    results = []
    for b in range(len(rows)):
      generated = tokens[b][gen_mask[b] == 1]
      results.append((self.tokenizer.decode(generated, stop_at_eos=True), int(gen_mask[b].sum())))
    return results

  def generate(self, conversations: Sequence[Sequence[Message]]) -> list[Reply]:
    """Replies to each conversation, batch_size prompts per sampler call (see the module docstring)."""
    s = self.settings
    prompts = self._prompt_ids(conversations)
    replies: list[Reply | None] = [None] * len(prompts)
    todo: list[tuple[int, list[int], bool]] = []
    for i, ids in enumerate(prompts):
      if len(ids) <= self.prompt_budget:
        todo.append((i, ids, False))
      elif s.overlong == "skip":
        replies[i] = Reply("", prompt_tokens=len(ids), skipped=True)
      else:
        todo.append((i, ids[-self.prompt_budget :], True))
    for start in range(0, len(todo), s.batch_size):
      chunk = todo[start : start + s.batch_size]
      outputs = self._chunk([ids for _, ids, _ in chunk])
      for (i, _, truncated), (text, new) in zip(chunk, outputs):
        replies[i] = Reply(text, prompt_tokens=len(prompts[i]), new_tokens=new, truncated=truncated)
    return [r for r in replies if r is not None]

  def respond(self, items: Sequence[EvalItem]) -> list[Reply]:
    """`generate` on the items' messages."""
    return self.generate([item.messages for item in items])

  def policy(self) -> Callable[[Sequence[Sequence[Message]]], list[str]]:
    """A batch policy (conversations -> texts), e.g. for ALFWorld's `run_episodes`."""
    return lambda batch: [r.text for r in self.generate(batch)]


# ---- loading ---------------------------------------------------------------------------------------------------------


def resolve_tokenizer(model_dir: str | pathlib.Path | None, tokenizer_path: str | pathlib.Path | None) -> Tokenizer:
  """`tokenizer_path` when given, else the model directory's own tokenizer files (or a .gguf model file's own
  tokenizer); a clear error when neither."""
  if tokenizer_path:
    return load_tokenizer(tokenizer_path)
  directory = pathlib.Path(model_dir) if model_dir else None
  if directory is not None and directory.is_file() and directory.suffix.lower() == ".gguf":
    return load_tokenizer(directory)
  if (
    directory is not None
    and directory.is_dir()
    and (any((directory / f).is_file() for f in _TOKENIZER_FILES) or any(directory.glob("*.model")))
  ):
    return load_tokenizer(directory)
  raise FileNotFoundError(
    f"no tokenizer: the model directory {directory} has no tokenizer.json, "
    "tokenizer_config.json or sentencepiece .model file; pass --tokenizer PATH"
  )


def load_model(
  model_dir: str | pathlib.Path, dtype: str = "float32", mesh: jax.sharding.Mesh | None = None
) -> Transformer:
  """An HF Llama/Qwen2 checkpoint directory, or a .gguf file, as a `Transformer` (on `mesh`, else on the first
  device)."""
  from genenv_jax.models.hf import load_hf  # pylint: disable=import-outside-toplevel

  directory = pathlib.Path(model_dir)
  if not (directory / "config.json").is_file() and not (directory.is_file() and directory.suffix.lower() == ".gguf"):
    raise FileNotFoundError(f"--model {directory} is not an HF model directory (no config.json) nor a .gguf file")
  return load_hf(directory, dtype=dtype, mesh=mesh)


def restore_run(workdir: str | pathlib.Path) -> tuple[Any, Any, int]:
  """(run, state, step): a training run rebuilt from WORKDIR/summary.json's config
  (`genenv_jax.coevolution.build.build`) and its whole state restored from WORKDIR/checkpoints' latest step."""
  import ml_collections  # pylint: disable=import-outside-toplevel

  from genenv_jax.coevolution.build import build  # pylint: disable=import-outside-toplevel
  from genenv_jax.training.checkpointing import Checkpointer, abstract_of  # pylint: disable=import-outside-toplevel

  workdir = pathlib.Path(workdir)
  summary, checkpoints = workdir / "summary.json", workdir / "checkpoints"
  if not summary.is_file() or not checkpoints.is_dir():
    raise FileNotFoundError(
      f"--workdir {workdir} is not a training run: it needs summary.json and checkpoints/ "
      "(written by python -m genenv_jax.main)"
    )
  config = json.loads(summary.read_text()).get("config")
  if not isinstance(config, dict):
    raise ValueError(f"{summary} holds no 'config' object; it was not written by genenv_jax.training.loop")
  run, state = build(ml_collections.ConfigDict(config))
  checkpointer = Checkpointer(checkpoints, save_every=1, async_save=False)
  try:
    step = checkpointer.latest_step()
    if step is None:
      raise FileNotFoundError(f"no checkpoint in {checkpoints}; train the run first")
    state, _ = checkpointer.restore(step, abstract_of(state))
  finally:
    checkpointer.close()
  return run, state, int(step)


def load_workdir(workdir: str | pathlib.Path, which: str = "agent") -> tuple[Transformer, Tokenizer, int]:
  """The agent (or env) of a training run at its latest checkpoint (`restore_run`), with the run's tokenizer; also
  the step. Only the chosen model's parameters are kept."""
  if which not in ("agent", "env"):
    raise ValueError(f"which must be 'agent' or 'env', got {which!r}")
  from flax import nnx  # pylint: disable=import-outside-toplevel

  run, state, step = restore_run(workdir)
  graphdef = run.coevolution.agent_graphdef if which == "agent" else run.coevolution.env_graphdef
  return nnx.merge(graphdef, getattr(state, which)), run.tokenizer, step
