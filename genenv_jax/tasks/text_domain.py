"""One generic text-domain adapter: a benchmark's task family as a training domain of the co-evolution step.

GenEnv (arXiv 2512.19682), Algorithm 1, on text tasks: the env model writes a task as text, the domain parses it into
an agent prompt plus a canonical gold spec (checking or computing the label itself, never trusting the env's answer
blindly), the agent answers, and the domain scores the answer with the benchmark's own rules. Parsing and scoring are
host Python, entered from the jitted step through `host_callback.host_map` (pure_callback inside shard_map, each
device decoding and scoring only its own rows). A `TaskFamily` (one file per benchmark, `*_tasks.py`) supplies the
text rules; this module turns them into the `base.Domain` protocol over any `Tokenizer`.

Shapes and encodings (every row static-shaped):
  env output     the task text in the family's format, then EOS ([B, env_output_len]); a row with no EOS before the
                 end of its budget (overflow), ids outside the vocabulary, or text the family rejects is invalid
  agent prompt   the family's chat messages rendered by `tokenizer.apply_chat_template` (generation prompt added;
                 BOS prepended for sentencepiece), left-padded to agent_prompt_len; longer -> invalid
  spec           the canonical gold text as UTF-8 bytes, spec[i] = byte i, -1 after its end ([B, spec_len] int32).
                 Bytes rather than token ids: exact for any text and any tokenizer (no decode(encode(x)) == x
                 assumption), and the verifier needs no tokenizer for it. Longer than spec_len -> invalid
  env prompt     (pure JAX packing, left-padded to env_prompt_len) the chat-rendered
                   system: family.env_instruction
                   user:   "Example task:\\n<seed task text>\\n\\nAgent success rate on tasks like it: <r>\\n
                            Write one new task in exactly this format."
                 <r> is the seed's recent p̂ to the nearest tenth ("0.0".."1.0"), "unknown" when not measured; the
                 seed text is the content of seed["env_ids"] (before its EOS)
  verify         R_agent = clip(family.score(gold, decoded response), 0, 1), 0 for invalid tasks. The response is
                 read up to its first EOS (all of it when the budget ran out: the benchmark scorers take any text)

Seed and held-out pools: family.seed_texts(data_dir) (training sources only, never the evaluation set) are shuffled
with `seed`; each is parsed by the same host parser as env output (so the round trip is exact by construction) and
kept only when it fits every length and its oracle answer (`family.oracle`) scores at least success_threshold. The
first num_heldout kept tasks are the held-out set, the next num_seeds (0 = all the rest) the seeds; dropped ones are
counted in `self.dropped` by reason.
"""

from __future__ import annotations

import collections
import dataclasses
import pathlib
from typing import Mapping, Protocol, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from genenv_jax.data import resolve_data_dir
from genenv_jax.models.tokenizer import SentencePieceTokenizer, Tokenizer
from genenv_jax.tasks import token_ops as ops
from genenv_jax.tasks.base import TaskBatch, host_parse, host_verify
from genenv_jax.tasks.benchmark import Message

SPEC_PAD = -1
RATE_TEXTS = tuple(f"{k // 10}.{k % 10}" for k in range(11)) + ("unknown",)
_MARKS = ("\x00SEED\x00", "\x00RATE\x00")
ENV_USER_TEMPLATE = (
  "Example task:\n"
  + _MARKS[0]
  + "\n\nAgent success rate on tasks like it: "
  + _MARKS[1]
  + "\nWrite one new task in exactly this format."
)


@dataclasses.dataclass(frozen=True)
class ParsedTask:
  """A task the family accepted: the agent's chat messages, the canonical gold text and a difficulty score."""

  messages: tuple[Message, ...]
  gold: str
  difficulty: float


class TaskFamily(Protocol):
  """The text rules of one benchmark's training domain (see the `*_tasks.py` modules)."""

  name: str
  env_instruction: str  # tells the env the task format (system message of the env prompt)

  def seed_texts(self, data_dir: pathlib.Path) -> list[str]:
    """Training tasks written in the env's format, deterministic order, none from the evaluation set."""

  def parse(self, text: str) -> ParsedTask | None:
    """The task an env text describes, or None when it is malformed or fails the family's checks. Never raises."""

  def oracle(self, gold: str) -> str | None:
    """A correct agent answer for a gold text (None when the family cannot write one)."""

  def score(self, gold: str, output: str) -> float:
    """R_agent in [0, 1] of an agent output against the gold text, by the benchmark's rules. Never raises."""


def encode_spec(text: str, width: int) -> np.ndarray | None:
  """UTF-8 bytes of `text` padded with SPEC_PAD to `width`, or None when longer."""
  raw = text.encode("utf-8")
  if len(raw) > width:
    return None
  out = np.full((width,), SPEC_PAD, np.int32)
  out[: len(raw)] = np.frombuffer(raw, np.uint8)
  return out


def decode_spec(row: np.ndarray) -> str | None:
  """The text of a spec row (bytes up to the first SPEC_PAD); None when they are not valid UTF-8 bytes."""
  row = np.asarray(row).reshape(-1)
  end = int(np.argmax(row == SPEC_PAD)) if (row == SPEC_PAD).any() else row.shape[0]
  data = row[:end]
  if ((data < 0) | (data > 255)).any():
    return None
  try:
    return bytes(data.astype(np.uint8).tolist()).decode("utf-8")
  except UnicodeDecodeError:
    return None


class TextDomain:
  """A `TaskFamily` as a `base.Domain` (module docstring); every setting is fixed at construction."""

  def __init__(
    self,
    family: TaskFamily,
    tokenizer: Tokenizer,
    *,
    data_dir: str | None = None,
    num_seeds: int = 0,
    num_heldout: int = 32,
    seed: int = 0,
    agent_prompt_len: int = 512,
    agent_answer_len: int = 128,
    env_prompt_len: int = 768,
    env_output_len: int = 384,
    spec_len: int = 512,
    success_threshold: float = 1.0,
  ):
    for name, value in (
      ("agent_prompt_len", agent_prompt_len),
      ("agent_answer_len", agent_answer_len),
      ("env_prompt_len", env_prompt_len),
      ("env_output_len", env_output_len),
      ("spec_len", spec_len),
    ):
      if not isinstance(value, int) or value < 2:
        raise ValueError(f"{name} must be an int >= 2, got {value!r}")
    if num_seeds < 0 or num_heldout < 1:
      raise ValueError(f"need num_seeds >= 0 (0 = all) and num_heldout >= 1, got {num_seeds} and {num_heldout}")
    if not 0.0 < success_threshold <= 1.0:
      raise ValueError(f"success_threshold must be in (0, 1], got {success_threshold}")
    self.family, self.tokenizer = family, tokenizer
    self.name = family.name
    self.data_dir = resolve_data_dir(data_dir)
    self.num_seeds, self.num_heldout, self.seed = num_seeds, num_heldout, seed
    self.agent_prompt_len, self.agent_answer_len = agent_prompt_len, agent_answer_len
    self.env_prompt_len, self.env_output_len, self.spec_len = env_prompt_len, env_output_len, spec_len
    self.success_threshold = float(success_threshold)
    self._add_bos = isinstance(tokenizer, SentencePieceTokenizer) and tokenizer.bos_id is not None
    self._env_pieces = self._env_prompt_pieces()
    rates = [tokenizer.encode(t) for t in RATE_TEXTS]
    width = max(len(r) for r in rates)
    self._rate_ids = np.asarray([r + [tokenizer.pad_id] * (width - len(r)) for r in rates], np.int32)
    self._rate_lens = np.asarray([len(r) for r in rates], np.int32)
    fixed = sum(len(p) for p in self._env_pieces) + width
    if fixed + env_output_len - 1 > env_prompt_len:  # a seed task is at most env_output_len - 1 tokens (then EOS)
      raise ValueError(
        f"env_prompt_len={env_prompt_len} cannot hold the env instruction ({fixed} tokens) plus a "
        f"seed task of up to env_output_len - 1 = {env_output_len - 1} tokens; use at least "
        f"{fixed + env_output_len - 1}"
      )
    self.dropped: dict[str, int] = {}
    self._pools: tuple[dict[str, np.ndarray], dict[str, np.ndarray]] | None = None

  def __repr__(self) -> str:
    return f"TextDomain({self.name!r}, data_dir={str(self.data_dir)!r})"

  # -- text <-> ids ----------------------------------------------------------------------------------------------------

  def _env_prompt_pieces(self) -> tuple[list[int], list[int], list[int]]:
    """Token ids of the env prompt's fixed text before the seed, between seed and rate, and after the rate."""
    text = self.tokenizer.apply_chat_template(
      [{"role": "system", "content": self.family.env_instruction}, {"role": "user", "content": ENV_USER_TEMPLATE}],
      add_generation_prompt=True,
    )
    head, rest = text.split(_MARKS[0])
    middle, tail = rest.split(_MARKS[1])
    return (
      self.tokenizer.encode(head, add_bos=self._add_bos),
      self.tokenizer.encode(middle),
      self.tokenizer.encode(tail),
    )

  def prompt_ids(self, messages: Sequence[Message]) -> list[int]:
    """The agent prompt's token ids for chat messages (chat template, generation prompt, BOS for sentencepiece)."""
    return self.tokenizer.encode(
      self.tokenizer.apply_chat_template(messages, add_generation_prompt=True), add_bos=self._add_bos
    )

  def _row_text(self, tokens: np.ndarray, mask: np.ndarray, require_eos: bool) -> str | None:
    ids = ops.content_ids(tokens, mask, self.tokenizer.eos_ids)
    if ids is None:
      if require_eos:
        return None
      ids = [int(t) for t, m in zip(tokens.tolist(), mask.tolist()) if m]
    try:
      return self.tokenizer.decode(ids)
    except ValueError:  # ids outside the tokenizer's vocabulary (a model vocabulary padded beyond it)
      return None

  def parse_text(self, text: str | None) -> tuple[ParsedTask, list[int], np.ndarray] | str:
    """(task, prompt ids, spec row) for an env text, or the reason it is invalid."""
    if text is None:
      return "undecodable"
    try:
      task = self.family.parse(text)
    except Exception:  # noqa: BLE001 (a family bug must not crash the step; tests call family.parse directly)
      task = None
    if task is None:
      return "rejected"
    ids = self.prompt_ids(task.messages)
    if len(ids) > self.agent_prompt_len:
      return "prompt_too_long"
    spec = encode_spec(task.gold, self.spec_len)
    if spec is None:
      return "spec_too_long"
    return task, ids, spec

  # -- host functions (entered through host_map) --------------------------------------------------------------------

  def parse_env_output_host(self, tokens: np.ndarray, mask: np.ndarray) -> dict[str, np.ndarray]:
    """Host parser: TaskBatch fields as numpy arrays (invalid rows: empty prompt, spec all SPEC_PAD)."""
    batch = tokens.shape[0]
    prompt_ids = np.full((batch, self.agent_prompt_len), self.tokenizer.pad_id, np.int32)
    prompt_mask = np.zeros((batch, self.agent_prompt_len), np.int32)
    spec = np.full((batch, self.spec_len), SPEC_PAD, np.int32)
    difficulty, valid = np.zeros((batch,), np.float32), np.zeros((batch,), bool)
    for b in range(batch):
      parsed = self.parse_text(self._row_text(tokens[b], mask[b], require_eos=True))
      if isinstance(parsed, str):
        continue
      task, ids, spec[b] = parsed
      prompt_ids[b, self.agent_prompt_len - len(ids) :] = ids
      prompt_mask[b, self.agent_prompt_len - len(ids) :] = 1
      difficulty[b], valid[b] = task.difficulty, True
    return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, spec=spec, difficulty=difficulty, valid=valid)

  def score_text(self, gold: str | None, output: str | None) -> float:
    """family.score clipped to [0, 1]; 0 for a missing gold or output, or a scorer that raises."""
    if gold is None or output is None:
      return 0.0
    try:
      value = float(self.family.score(gold, output))
    except Exception:  # noqa: BLE001 (never crash the step; the family tests exercise the scorer directly)
      return 0.0
    return float(np.clip(value, 0.0, 1.0)) if np.isfinite(value) else 0.0

  def gold_answer(self, spec: np.ndarray) -> str:
    """The canonical gold text of one spec row (for logs); "" when the row holds no valid UTF-8 text."""
    return decode_spec(np.asarray(spec)) or ""

  def verify_host(
    self, spec: np.ndarray, valid: np.ndarray, response: np.ndarray, response_mask: np.ndarray
  ) -> np.ndarray:
    """Host verifier: R_agent [B] float32."""
    out = np.zeros((spec.shape[0],), np.float32)
    for b in range(spec.shape[0]):
      if valid[b]:
        out[b] = self.score_text(decode_spec(spec[b]), self._row_text(response[b], response_mask[b], False))
    return out

  # -- the Domain protocol ---------------------------------------------------------------------------------------------

  def parse_env_output(self, tokens: jax.Array, mask: jax.Array) -> TaskBatch:
    return host_parse(self.parse_env_output_host, tokens, mask, self.agent_prompt_len, self.spec_len)

  def verify(self, tasks: TaskBatch, response: jax.Array, response_mask: jax.Array) -> jax.Array:
    return host_verify(self.verify_host, tasks, response, response_mask)

  def env_prompt(self, seed: Mapping[str, jax.Array], stats: Mapping[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Jittable: the env prompt of the module docstring per seed row, left-padded to env_prompt_len."""
    head, middle, tail = self._env_pieces
    env_ids, env_mask = jnp.asarray(seed["env_ids"], jnp.int32), jnp.asarray(seed["env_mask"], jnp.int32)
    length, _ = ops.content_end(env_ids, env_mask, self.tokenizer.eos_ids)
    rate = ops.rate_tenths(stats, env_ids.shape[0])
    return ops.pack_left_padded(
      [
        ops.const(head),
        (env_ids, length),
        ops.const(middle),
        (jnp.asarray(self._rate_ids)[rate], jnp.asarray(self._rate_lens)[rate]),
        ops.const(tail),
      ],
      self.env_prompt_len,
      self.tokenizer.pad_id,
    )

  # -- seed and held-out pools -----------------------------------------------------------------------------------------

  def _right_padded(self, rows: list[list[int]], width: int) -> tuple[np.ndarray, np.ndarray]:
    eos = self.tokenizer.eos_id
    ids = np.full((len(rows), width), eos, np.int32)
    mask = np.zeros((len(rows), width), np.int32)
    for b, row in enumerate(rows):
      ids[b, : len(row)], mask[b, : len(row) + 1] = row, 1  # the content, then one EOS under mask 1
    return ids, mask

  def _build_pools(self) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    texts = self.family.seed_texts(self.data_dir)
    order = np.random.default_rng(self.seed).permutation(len(texts))
    kept: list[tuple[str, list[int], str]] = []
    seen: set[str] = set()
    dropped: collections.Counter[str] = collections.Counter()
    want = self.num_heldout + (self.num_seeds or len(texts))
    for i in order.tolist():
      if len(kept) >= want:
        break
      text = texts[i]
      env = self.tokenizer.encode(text)
      if len(env) + 1 > self.env_output_len:
        dropped["env_text_too_long"] += 1
        continue
      parsed = self.parse_text(text)
      if isinstance(parsed, str):
        dropped[parsed] += 1
        continue
      task = parsed[0]
      answer = self.family.oracle(task.gold)
      if answer is None or self.score_text(task.gold, answer) < self.success_threshold:
        dropped["no_oracle"] += 1
        continue
      answer_ids = self.tokenizer.encode(answer)
      if len(answer_ids) + 1 > self.agent_answer_len:
        dropped["answer_too_long"] += 1
        continue
      key = text.strip()
      if key in seen:
        dropped["duplicate"] += 1
        continue
      seen.add(key)
      kept.append((text, env, answer))
    self.dropped = dict(dropped)
    if len(kept) < self.num_heldout + max(self.num_seeds, 1):
      raise ValueError(
        f"{self.name}: only {len(kept)} of {len(texts)} training tasks fit (dropped: {self.dropped}); "
        f"need num_heldout={self.num_heldout} + num_seeds={self.num_seeds or 1}. Raise the lengths "
        "(env_output_len, agent_prompt_len, agent_answer_len, spec_len) or lower the counts"
      )

    def arrays(rows: list[tuple[str, list[int], str]]) -> dict[str, np.ndarray]:
      env_ids, env_mask = self._right_padded([r[1] for r in rows], self.env_output_len)
      tasks = self.parse_env_output_host(env_ids, env_mask)
      if not tasks["valid"].all():
        raise AssertionError(
          f"{self.name}: a kept task failed to re-parse from its tokens; the tokenizer does not round-trip its text"
        )
      answer_ids, answer_mask = self._right_padded([self.tokenizer.encode(r[2]) for r in rows], self.agent_answer_len)
      return dict(tasks, env_ids=env_ids, env_mask=env_mask, answer_ids=answer_ids, answer_mask=answer_mask)

    return arrays(kept[self.num_heldout :]), arrays(kept[: self.num_heldout])

  def _pool(self, which: int) -> dict[str, np.ndarray]:
    if self._pools is None:
      self._pools = self._build_pools()
    return {k: v.copy() for k, v in self._pools[which].items()}

  def seed_tasks(self) -> dict[str, np.ndarray]:
    """The seed pool (base.Domain.seed_tasks keys), built once and cached."""
    return self._pool(0)

  def heldout_tasks(self) -> dict[str, np.ndarray]:
    """The held-out set: same keys, disjoint from the seeds (different training tasks)."""
    return self._pool(1)

  def env_texts(self, tasks: Mapping[str, np.ndarray]) -> list[str]:
    """The env text of each row of a pool (for inspection and tests)."""
    return [self._row_text(i, m, True) or "" for i, m in zip(tasks["env_ids"], tasks["env_mask"])]
