"""SmolLM2-135M-Instruct as both agent and env, co-evolving on arithmetic on a 2-core CPU in under an hour (issue 40).

  python -m genenv_jax.data fetch smollm2          # the model: <data dir>/smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
  python -m genenv_jax.main --config=configs/smollm2.py --workdir=runs/smollm2
  python -m genenv_jax.sweep --config=configs/smollm2.py --variants=coevolve,random,static,grpo --seeds=0,1,2 \
      --workdir=runs/smollm2_sweep

The model file is looked up where `fetch` puts it: the data directory of genenv_jax/data/location.py (`$GENENV_DATA`,
else `~/.cache/genenv_jax/data`), as `smollm2/SmolLM2-135M-Instruct.Q4_1.gguf` (manifest dataset `smollm2`). It is both
models' `hf_path` and the run's `tokenizer` (the model's own GPT-2-style BPE, which spells every digit and '+' as one
token, as the arithmetic domain needs). When it is absent, loading this config stops with the data manifest's error,
which names the fetch command; a copy elsewhere is used by pointing GENENV_DATA at the directory that holds
`smollm2/`.

Variants (`--config=configs/smollm2.py:VARIANT`, composable left to right with '+', e.g. `smoke+random`):
  (none)  the run, also named `coevolve`: GenEnv, the env trained by RWR toward the α band.
  random  GenEnv-Random: the env samples tasks but is never trained (env.train = False).
  static  static augmentation: the warm-started env writes `pools.static_rounds` batches once, then only replay.
  grpo    plain GRPO on the seed tasks, no env.
  smoke   two steps of everything at a few rows and a short warm start, for CI (tests/integration/
          test_smollm2_step.py) and for checking an install: about a minute here, compile included.
  api_bank  the API-Bank training domain instead of arithmetic (below, "API-Bank"); applied first wherever it is
          named, so `api_bank+random`, `api_bank+static`, `api_bank+smoke` are that variant on API-Bank.
`static` and `grpo` train the agent on as many tasks per step as `coevolve` (its fresh + replayed), so that the four
differ only in where the tasks come from.

The task family: the demo's (configs/default.py), sums of single digits, here 2..6 of them (difficulty = the number of
'+', 1..5). After the warm start below, the notes' measurement (issue 40's measurement of 2026-12-06, on the notes'
40 + 40-step warm start) had held-out accuracy 0.30/0.20/0.20 on sums of 3/4/5 digits, and the agent's success on
generated tasks at 0.19-0.38, near the α band; zero-shot, 2-digit sums were right 0.47 of the time. 2..6 digits thus
spans levels above, inside and below the band. Seeds are weighted 0.6**k toward the easy levels, as the demo's.
Prompts are the domain's raw text (`Compute: 3+4 =`), no chat template: the warm start teaches that format.

The warm start (WarmStartSettings; training/warm_start.py): 40 agent + 40 env supervised steps, batch 16, lr 1e-4,
full-parameter. Without it, every env task was invalid (the env continued its prompt) and the agent's reward was 0
(it answered " 11." with no end token); after it, held-out 0.23 and no invalid env task (the notes above). The 7B
config skips the warm start (an instruction-tuned model of that size follows a format from its prompt); this one asks
for it, and the loop runs it on a real checkpoint as on a random one.

LoRA on, for both models (rank 8, α = 16, every projection; models/lora.py), because memory is this machine's binding
limit: the KL references are the base weights with the adapters off (no copy of either model), and AdamW holds moments
of the adapters alone, about 3 GB less than full fine-tuning of two 135M models in float32 (two 0.54 GB references and
2 x 1.1 GB of moments); the update also skips the base weights' gradients. LoRA matches full fine-tuning in RL at far
smaller ranks than this (Schulman et al., "LoRA Without Regret", Thinking Machines 2025), with a learning rate about
10x full fine-tuning's: lr 1e-5 is a tenth of the full-parameter warm start's 1e-4 above, so 1e-4 for the adapters.
The warm start trains every parameter and is then folded into the base (models.lora.fold).

Sizes: per step 6 env tasks + 2 replayed = 8 tasks x G = 5 rollouts (G = 5 so that p̂ in {0.4, 0.6} passes the band
|p̂ - α| <= k_min; with G = 4 or 8 only p̂ = 0.5 would), the agent's update in 2 mini-batches of 20 rows. Lengths are
what the longest task needs (domain *_len = 0): agent prompt 16 + answer 5 tokens, env prompt 25 + output 12. Held-out:
200 tasks, 40 per level. 80 steps, a checkpoint every 10, an evaluation every 20.

Measured (2026-12-06, this 2-core CPU beside a 2-process sweep, load average 10-11; `/usr/bin/time -v python -m
genenv_jax.main --config=configs/smollm2.py --config.total_steps=6`): peak resident memory 6.8 GB; the warm start 884 s
(agent SFT loss 0.75 -> 0.33, env 1.39 -> 1.29); a step about 20 s (steps 2-6: 19-23 s; the first, compiling, 88 s);
1,153 s in all. Held-out accuracy 0.000 before the warm start, 0.405 after it, by level 1.00 / 0.55 / 0.20 / 0.18 /
0.10 (sums of 2..6 digits): levels above, inside and below the α band; no env task invalid. The whole 80-step run
is so about 15 + 28 + 3 minutes (warm start, steps, evaluations) under that load: run sweeps with --jobs=1 on 24 GB.
The smoke variant: 332 s under the same load (`python -m genenv_jax.main --config=configs/smollm2.py:smoke`).

API-Bank (`api_bank`; docs/EXPERIMENTS.md, "SmolLM2 on API-Bank: held-out before and after training"): the domain of
configs/tools.py:api_bank (benchmarks/api_bank/family.py: the env writes `API:` / `User:` / `Call:` lines, the agent
answers with a `<tool_call>` block) on API-Bank's level-3 training split (`python -m genenv_jax.data fetch api_bank`),
both models still SmolLM2 with LoRA as above.

  python -m genenv_jax.main --config=configs/smollm2.py:api_bank --workdir=runs/smollm2_api_bank
  python -m genenv_jax.evaluate --benchmark=api_bank --workdir=runs/smollm2_api_bank --limit=10 --batch_size=10 \
      --max_new_tokens=96            # the same with --model=<the GGUF file> scores the untrained model

Lengths are in SmolLM2's tokens (API_BANK_LENGTHS, measured on the split): tasks of at most 191 tokens + EOS, which
keeps 664 of the split's 863 tasks (181 longer; 8 held out, 656 seeds, two thirds of them ToolSearcher calls), agent
prompt 256 + answer 48, env prompt 320 + output 192: 10-15x the arithmetic run's, so the rest is cut to what this
loaded 2-core CPU runs in about a quarter of an hour: per step 2 env tasks + 1 replayed x G = 4 (only p̂ = 0.5 passes
the band), the agent's update in 2 mini-batches (no remat: every layer's activations are kept), a full-parameter
warm start of 8 + 8 steps at batch 2, 4 steps, the env sampling at temperature 0.5 and the agent at 0.7 (at 1 a small
env derails over a long JSON task: configs/tools.py's demo). The evaluation set's prompts (API-Bank levels 1-3,
their own system prompt and the dialogue) are mostly 500-1,700 tokens, far longer than the training tasks'.

Measured (2026-12-06, beside a SmolLM2 sweep and a screening run, load average 3-8; `/usr/bin/time -v python -m
genenv_jax.main --config=configs/smollm2.py:api_bank`): 975 s in all, peak resident memory 10.2 GB; the warm start
288 s (agent SFT loss 1.50 -> 0.21, env 1.04 -> 0.70), steps 195 s (compiling) then 130-147 s. The env's tasks parsed
7 times of 8 and were all ToolSearcher calls, whose free-text keywords the agent rarely matched exactly (p̂ 0.25 on
the first, 0 on the six after): no task in the band, so RWR never updated the env; the run's 8 held-out tasks 0.125
after the warm start and at the end. Without the warm start all 4 env tasks of 2 steps were invalid. API-Bank's
evaluation set, the first 10 items of each level: 0/30 before and 0/30 after; the agent answered in the `<tool_call>`
format far more often after (docs/EXPERIMENTS.md, "SmolLM2 on API-Bank").
"""

import pathlib

import ml_collections

from configs import default, tools
from genenv_jax import data
from genenv_jax.coevolution.settings import EnvSettings

DATASET = "smollm2"
GGUF = "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"  # the manifest's path of the model file, under the data directory

VARIANTS = ("coevolve", "random", "static", "grpo", "smoke", "api_bank")

# API-Bank in SmolLM2's own tokens (the `api_bank` variant): agent prompt, agent answer, env prompt, env output, spec
# bytes. Measured over the 854 training tasks that parse (2026-12-06): env texts 93 / 145 / 223 tokens (10th / 50th /
# 90th percentile); the 676 that fit 191 tokens (+ EOS) have agent prompts of at most 239 tokens, oracle answers of
# 31-49 and golds of at most 125 bytes; the env prompt is 106 tokens of instruction and template + the rate + the seed
# task. At 127 tokens only 370 would fit, 354 of them calls of ToolSearcher, which no evaluation item's gold calls.
API_BANK_LENGTHS = dict(agent_prompt_len=256, agent_answer_len=48, env_prompt_len=320, env_output_len=192, spec_len=128)


def model_file(data_dir: str | None = None) -> str:
  """The fetched GGUF file under the data directory (genenv_jax.data.location); raises the manifest's
  DataMissingError, which names `python -m genenv_jax.data fetch smollm2 --data_dir DIR`, when it is absent."""
  root = data.resolve_data_dir(data_dir)
  path = root / GGUF
  if not path.is_file():
    data.require(root, [DATASET])  # raises: the file is missing, and the error says how to fetch it
  return str(pathlib.Path(path).absolute())


def get_config(arg: str = "") -> ml_collections.ConfigDict:
  c = default.get_config("")
  path = model_file()
  c.total_steps = 80
  c.checkpoint_every = 10
  c.eval_every = 20
  c.log_every = 1
  c.tokenizer = path  # the model's own tokenizer, read from the same file

  for model in (c.agent.model, c.env.model):
    model.hf_path = path
    model.dtype = "float32"
    model.remat = "none"

  c.domain.update(
    dict(min_operands=2, max_operands=6, max_digits=1, operators="+", bound=999, seed_decay=0.6, num_seeds=2048)
  )
  c.domain.num_heldout = 200  # 40 per level

  c.agent.grpo.group_size = 5
  c.agent.grpo.minibatches = 2
  c.agent.optimizer.lr = 1e-4
  c.env.optimizer.lr = 1e-4
  # the settings' env KL (0.001, the paper's weak pull back), not the demo's 0.5: that was measured on the toy alone,
  # and this config's figures were taken at 0.001 (docs/EXPERIMENTS.md, "The env's KL to its initial model at 0.5")
  c.env.kl_coef = EnvSettings.kl_coef
  c.env.num_seeds = 6
  c.pools.num_replay = 2
  for who in (c.agent, c.env):
    who.lora.enabled = True

  c.warm_start.agent_steps = 40
  c.warm_start.env_steps = 40
  c.warm_start.batch_size = 16
  c.warm_start.lr = 1e-4

  variants = [v.strip() for v in arg.split("+")]
  for variant in sorted(variants, key=lambda v: v != "api_bank"):  # the domain first: the others size from it
    _apply_variant(c, variant)
  return c


def _apply_variant(c: ml_collections.ConfigDict, variant: str) -> None:
  """One named override set (module docstring); "" and "coevolve" leave the run as it is."""
  if variant in ("", "coevolve"):
    return
  if variant == "api_bank":
    _api_bank(c)
    return
  if variant == "random":
    c.env.train = False
  elif variant in ("static", "grpo"):
    c.mode = variant
    c.pools.num_replay = c.env.num_seeds * c.env.samples_per_seed + c.pools.num_replay  # coevolve's tasks per step
  elif variant == "smoke":
    c.total_steps = 2
    c.checkpoint_every = 1
    c.eval_every = 2
    c.domain.num_seeds = 256
    c.domain.num_heldout = 5  # one per level
    c.agent.grpo.group_size = 2
    c.agent.grpo.minibatches = 1
    c.env.num_seeds = 2
    c.pools.num_replay = 1 if c.mode == "coevolve" else 3  # static, grpo: as many tasks per step as coevolve
    c.pools.static_rounds = 1
    c.warm_start.agent_steps = 2
    c.warm_start.env_steps = 2
    c.warm_start.batch_size = 4
  else:
    raise ValueError(
      f"unknown variant {variant!r} of configs/smollm2.py; choose from {', '.join(VARIANTS)} (or none), joined with "
      "'+' to compose, e.g. smoke+random"
    )


def _api_bank(c: ml_collections.ConfigDict) -> None:
  """`api_bank`: the API-Bank training domain (configs/tools.py's, benchmarks/api_bank/family.py) on SmolLM2, sized
  to its tokenizer and this CPU (module docstring, "API-Bank")."""
  c.domain = ml_collections.ConfigDict(
    dict(
      name="api_bank",
      data_dir="",
      num_seeds=0,
      num_heldout=8,
      success_threshold=tools.LENGTHS["api_bank"][-1],  # configs/tools.py's: a call counts when it is exact
      **API_BANK_LENGTHS,
    )
  )
  c.total_steps = 4
  c.checkpoint_every = 2
  c.eval_every = 4
  c.agent.grpo.group_size = 4
  c.agent.grpo.minibatches = 2  # two of 6 rows: without remat, the update keeps every layer's activations
  c.env.num_seeds = 2
  c.pools.num_replay = 1
  c.env.sampling.temperature = 0.5
  c.agent.sampling.temperature = 0.7
  c.warm_start.agent_steps = 8
  c.warm_start.env_steps = 8
  c.warm_start.batch_size = 2
