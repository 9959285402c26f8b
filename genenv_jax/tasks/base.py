"""The training-domain interface: what the co-evolution step needs from a task family.

GenEnv, Algorithm 1: the env model writes a task conditioned on a seed task (and recent success statistics); the
domain turns that text into an agent task whose label it computes or checks itself (never trusting the env's own
answer); the agent answers; the domain verifies the answer into R_agent in [0, 1].

Everything is token ids with static shapes, so a domain runs inside the one jitted step. A verifier (and a parser) is
either pure JAX over token ids, or host Python entered through `genenv_jax.tasks.host_callback` (pure_callback
inside shard_map, each device scoring only its own rows). Malformed env output gives `valid = False`, never an error.
"""

from __future__ import annotations

from typing import Callable, Protocol

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from genenv_jax.tasks.host_callback import host_map


@struct.dataclass
class TaskBatch:
  """A batch of agent tasks: the agent's (left-padded) prompt, the evaluation spec, and bookkeeping.

  `spec` is domain-defined int32 data (e.g. the computed answer); `difficulty` is the domain's own measure of the
  task; `valid` is False for env output that did not parse into a well-formed task.
  """

  prompt_ids: jax.Array  # [B, agent_prompt_len] int32
  prompt_mask: jax.Array  # [B, agent_prompt_len] int32
  spec: jax.Array  # [B, spec_len] int32
  difficulty: jax.Array  # [B] float32
  valid: jax.Array  # [B] bool


class Domain(Protocol):
  """A task family. Static attributes fix every shape of the compiled step."""

  name: str
  agent_prompt_len: int  # tokens of an agent prompt
  agent_answer_len: int  # max new tokens of an agent answer
  env_prompt_len: int  # tokens of an env prompt
  env_output_len: int  # max new tokens the env writes per task
  spec_len: int
  success_threshold: float  # R_agent >= threshold counts as a success for p̂

  def seed_tasks(self) -> dict[str, np.ndarray]:
    """The seed pool, spanning the difficulty range, as host arrays with a leading task dimension.

    Keys: the TaskBatch fields (prompt_ids, prompt_mask, spec, difficulty, valid) plus `env_ids` / `env_mask`, the
    task written as the env would write it ([N, env_output_len], right-padded, ending in EOS), and `answer_ids` /
    `answer_mask`, a correct agent answer ([N, agent_answer_len], right-padded, ending in EOS). The last two pairs
    are the supervised warm-start targets.
    """

  def heldout_tasks(self) -> dict[str, np.ndarray]:
    """A fixed held-out evaluation set, same keys as seed_tasks, disjoint from it."""

  def env_prompt(self, seed: dict[str, jax.Array], stats: dict[str, jax.Array]) -> tuple[jax.Array, jax.Array]:
    """Jittable: the env's prompt for each seed task ([B, env_prompt_len] ids and mask, left-padded).

    `seed` holds seed_tasks() fields for a batch; `stats` may hold recent statistics (e.g. `p_hat` [B]).
    """

  def parse_env_output(self, tokens: jax.Array, mask: jax.Array) -> TaskBatch:
    """Jittable: env output tokens [B, env_output_len] -> agent tasks, computing each task's label itself."""

  def verify(self, tasks: TaskBatch, response: jax.Array, response_mask: jax.Array) -> jax.Array:
    """Jittable: R_agent [B] float32 in [0, 1] for responses [B, agent_answer_len]; 0 for invalid tasks."""

  def gold_answer(self, spec: np.ndarray) -> str:
    """Host: the gold answer of one spec row [spec_len] as text, for the logged examples."""


def host_parse(
  parse_host: Callable[[np.ndarray, np.ndarray], dict[str, np.ndarray]],
  tokens: jax.Array,
  mask: jax.Array,
  agent_prompt_len: int,
  spec_len: int,
) -> TaskBatch:
  """Jittable: a host-Python parser `parse_host(tokens, mask) -> TaskBatch fields as numpy` entered through
  `host_map` (each device parses only its own rows), with the TaskBatch shapes fixed by the two lengths."""
  batch = tokens.shape[0]
  out_like = dict(
    prompt_ids=jax.ShapeDtypeStruct((batch, agent_prompt_len), jnp.int32),
    prompt_mask=jax.ShapeDtypeStruct((batch, agent_prompt_len), jnp.int32),
    spec=jax.ShapeDtypeStruct((batch, spec_len), jnp.int32),
    difficulty=jax.ShapeDtypeStruct((batch,), jnp.float32),
    valid=jax.ShapeDtypeStruct((batch,), jnp.bool_),
  )
  return TaskBatch(**host_map(parse_host, out_like, tokens, mask))


def host_verify(
  verify_host: Callable[..., np.ndarray], tasks: TaskBatch, response: jax.Array, response_mask: jax.Array
) -> jax.Array:
  """Jittable: R_agent [B] float32 from a host-Python `verify_host(spec, valid, response, response_mask)`."""
  out_like = jax.ShapeDtypeStruct((response.shape[0],), jnp.float32)
  return host_map(verify_host, out_like, tasks.spec, tasks.valid, response, response_mask)
