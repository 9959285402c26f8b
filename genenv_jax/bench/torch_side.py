"""The PyTorch side of bench.step, in a process of its own, so that its memory and threads do not count against ours:
transformers' model of a checkpoint directory (ours exported with `save_hf`), torch.optim.AdamW, and transformers'
`generate` for sampling.

  python -m genenv_jax.bench.torch_side --spec=SPEC.json

SPEC.json (bench.step writes it) names the checkpoint directory, the torch thread count, the timed calls per job,
the optimizer (lr, b1, b2, eps, weight_decay, max_grad_norm) and the jobs, each reading its arrays from an .npz file:
  generate  greedy `generate` of `new_tokens` tokens per row on `ids` / `mask` (sampler.hf_greedy), and of one token
            (prefill alone): both timed; the tokens of the long call come back, for comparison with ours
  forward   a no-grad forward giving log π of `response` after `prompt_ids` (the reference forward)
  update    `minibatches` steps of forward + backward + global-norm clipping + AdamW on consecutive mini-batches of
            the batch, with loss -Σ adv·log π·m / Σ m (m = response_mask); `reference`: a no-grad forward of the whole
            batch first (the agent update's reference forward for the KL)
Log-probs come from the LM head at the positions that predict response tokens only (`logits_to_keep`), as ours
computes them (rl.logprobs.response_logprobs), so both do the same FLOPs. The jobs run in the order given on one
model; bench.step puts the generate jobs first, while the weights are those of the checkpoint.

Each job: one warm-up call, then --repeats timed calls (sampler.timed). Prints one line `JSON: {...}`: the versions,
threads, parameter count, load seconds, each job's times, and the process's peak resident memory (timing.peak_rss).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Sequence

import numpy as np
from absl import flags

from genenv_jax import cli
from genenv_jax.bench import timing
from genenv_jax.bench.sampler import hf_greedy, timed


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  _FLAGS = (
    flags.DEFINE_string(
      "spec", None, "The JSON file that names the checkpoint, threads, repeats and jobs.", flag_values=flag_values
    ),
  )
  flags.mark_flag_as_required("spec", flag_values=flag_values)


def update_calls(model, batch: dict[str, np.ndarray], optimizer: dict[str, float]) -> dict[str, Callable]:
  """{"logp": rows -> log π of the response tokens [rows, R] (grad as the caller's context says), "step": rows -> one
  fwd+bwd+clip+AdamW step on those rows (returns the loss)} for one batch."""
  import torch

  p = batch["prompt_ids"].shape[1]
  r = batch["response"].shape[1]
  batch = {k: np.array(v) for k, v in batch.items()}  # writable copies (torch warns on read-only arrays)
  ids = torch.as_tensor(np.concatenate([batch["prompt_ids"], batch["response"]], 1), dtype=torch.long)
  mask = torch.as_tensor(np.concatenate([batch["prompt_mask"], batch["response_mask"]], 1), dtype=torch.long)
  resp = torch.as_tensor(batch["response"], dtype=torch.long)
  resp_mask = torch.as_tensor(batch["response_mask"], dtype=torch.float32)
  adv = torch.as_tensor(batch["adv"], dtype=torch.float32)
  keep = torch.arange(p - 1, p - 1 + r)  # the positions whose logits predict the response tokens
  opt = torch.optim.AdamW(
    model.parameters(),
    lr=optimizer["lr"],
    betas=(optimizer["b1"], optimizer["b2"]),
    eps=optimizer["eps"],
    weight_decay=optimizer["weight_decay"],
  )

  def logp(rows):
    logits = model(input_ids=ids[rows], attention_mask=mask[rows], logits_to_keep=keep).logits.float()
    return torch.log_softmax(logits, -1).gather(-1, resp[rows][..., None])[..., 0]

  def step(rows):
    opt.zero_grad(set_to_none=True)
    m = resp_mask[rows]
    loss = -(logp(rows) * adv[rows, None] * m).sum() / m.sum().clamp(min=1.0)
    loss.backward()
    if optimizer["max_grad_norm"] > 0:
      torch.nn.utils.clip_grad_norm_(model.parameters(), optimizer["max_grad_norm"])
    opt.step()
    return loss

  return {"logp": logp, "step": step}


def job_call(model, job: dict[str, Any], optimizer: dict[str, float]) -> Callable[[], Any]:
  """A blocking zero-argument call doing one job's work (module docstring)."""
  import torch

  arrays = dict(np.load(job["batch"]))
  if job["kind"] == "generate":
    return lambda: hf_greedy(model, arrays["ids"], arrays["mask"], job["new_tokens"])
  calls = update_calls(model, arrays, optimizer)
  everything = slice(None)

  def forward():
    with torch.no_grad():
      return calls["logp"](everything)

  if job["kind"] == "forward":
    return forward
  n, m = arrays["response"].shape[0], job["minibatches"]
  chunks = [slice(i * n // m, (i + 1) * n // m) for i in range(m)]

  def update():
    if job.get("reference"):
      forward()
    for c in chunks:
      loss = calls["step"](c)
    return loss.item()

  return update


def main(argv: Sequence[str]) -> None:
  """Runs the spec's jobs; prints the `JSON: ...` line."""
  cli.no_arguments(argv)
  with open(cli.namespace(_FLAGS).spec) as f:
    spec = json.load(f)
  import torch
  import transformers

  transformers.utils.logging.disable_progress_bar()
  torch.set_num_threads(spec["threads"])
  t0 = time.perf_counter()
  model = transformers.AutoModelForCausalLM.from_pretrained(spec["model_dir"], dtype=torch.float32).train()
  result: dict[str, Any] = {
    "torch": torch.__version__,
    "transformers": transformers.__version__,
    "threads": torch.get_num_threads(),
    "params": int(sum(t.numel() for t in model.parameters())),
    "load_s": time.perf_counter() - t0,
    "jobs": {},
  }
  for job in spec["jobs"]:
    out: dict[str, Any] = {}
    if job["kind"] == "generate":
      first = job_call(model, {**job, "new_tokens": 1}, spec["optimizer"])
      out["first_warmup_s"], out["first_times"], _ = timed(first, spec["repeats"])
    out["warmup_s"], out["times"], last = timed(job_call(model, job, spec["optimizer"]), spec["repeats"])
    if job["kind"] == "generate":
      out["tokens"] = np.asarray(last).tolist()
    result["jobs"][job["name"]] = out
  result["peak_rss_bytes"] = timing.peak_rss_bytes()
  print(timing.JSON_PREFIX + json.dumps(result))


def run(spec: dict[str, Any], directory: str) -> dict[str, Any]:
  """Writes `spec` to DIRECTORY/torch_spec.json and runs this command on it in a process of its own; returns its
  JSON with the process's wall seconds."""
  path = f"{directory}/torch_spec.json"
  with open(path, "w") as f:
    json.dump(spec, f)
  result, wall = timing.run_json("genenv_jax.bench.torch_side", [f"--spec={path}"])
  return {**result, "wall_s": wall}


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.bench.torch_side")
