"""LoRA adapters (models/lora.py): a fresh adapter is a no-op, base + adapters equals the merged weights (float32,
within 1e-5), the adapters off give the base exactly, only the adapters get gradients and move, dropout acts in a
training forward only, the export merges them (transformers reads it) and writes them apart in peft's layout."""

import json

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx
from hf_models import TINY_CONFIGS, hf_logits, make_hf_model, save_hf_model

from genenv_jax.models import lora
from genenv_jax.models.config import ModelConfig
from genenv_jax.models.hf import load_hf, save_hf
from genenv_jax.models.transformer import Transformer
from genenv_jax.rl.updates import gradient_step

CONFIG = ModelConfig(
  vocab_size=96,
  hidden_size=32,
  intermediate_size=48,
  num_layers=3,
  num_heads=4,
  num_kv_heads=2,
  head_dim=8,
  qkv_bias=True,
  attention="naive",
)
SPEC = lora.LoraSpec(rank=4, alpha=8.0)


def batch(vocab=CONFIG.vocab_size):
  ids = jax.random.randint(jax.random.key(1), (3, 9), 0, vocab)
  mask = jnp.ones((3, 9), bool).at[1, :3].set(False)  # one left-padded row
  return ids, mask


def trained_like(model: nnx.Module, seed: int = 0, size: float = 0.2) -> nnx.Module:
  """`model` with every adapter's B drawn at random (as training leaves it), in place."""
  for i, adapter in enumerate(lora.adapters_of(model).values()):
    adapter.b[...] = size * jax.random.normal(jax.random.fold_in(jax.random.key(seed), i), adapter.b.shape)
  return model


def logits(model):
  ids, mask = batch(model.config.vocab_size)
  return np.asarray(model(ids, mask)[0]), np.asarray(mask)


def test_a_fresh_adapter_is_a_no_op_and_each_target_gets_one():
  model = Transformer(CONFIG, rngs=nnx.Rngs(0))
  base, _ = logits(model)
  lora.attach(model, SPEC, seed=1)
  assert sorted(lora.adapters_of(model)) == sorted(lora.TARGETS)
  for adapter in lora.adapters_of(model).values():
    assert adapter.a.shape[-1] == 4 and adapter.b.shape[1] == 4 and not np.any(np.asarray(adapter.b[...]))
    assert np.any(np.asarray(adapter.a[...]))
  np.testing.assert_array_equal(logits(model)[0], base)  # B = 0: (x A) B = 0 exactly


@pytest.mark.parametrize("targets", [tuple(lora.TARGETS), ("q_proj", "v_proj"), ("o_proj", "down_proj")])
def test_base_plus_adapters_equals_the_merged_weights(targets):
  model = trained_like(lora.attach(Transformer(CONFIG, rngs=nnx.Rngs(0)), lora.LoraSpec(4, 8.0, targets), seed=1))
  base, mask = logits(Transformer(CONFIG, rngs=nnx.Rngs(0)))
  adapted, _ = logits(model)
  merged = lora.merged(model)
  assert lora.adapters_of(merged) == {} and lora.adapters_of(model)  # a copy; the adapted model keeps its adapters
  assert np.abs(adapted - base).max() > 0.1  # the adapters matter here
  assert np.abs((logits(merged)[0] - adapted) * mask[..., None]).max() < 1e-5


def test_the_adapters_off_give_the_base_exactly_without_copying_it():
  model = trained_like(lora.attach(Transformer(CONFIG, rngs=nnx.Rngs(0)), SPEC, seed=1))
  base, _ = logits(Transformer(CONFIG, rngs=nnx.Rngs(0)))
  graphdef, state = nnx.split(model)
  ref = lora.reference(state)
  np.testing.assert_array_equal(logits(nnx.merge(graphdef, ref))[0], base)
  # the base weights are the same arrays, only the adapters' B are new (zeros)
  ref_attn, attn = ref["layers"]["attn"], state["layers"]["attn"]
  assert ref_attn["q_proj"].get_value() is attn["q_proj"].get_value()
  assert ref_attn["q_proj_lora"]["a"].get_value() is attn["q_proj_lora"]["a"].get_value()


def test_only_the_adapters_get_gradients_and_move():
  model = lora.attach(Transformer(CONFIG, rngs=nnx.Rngs(0)), SPEC, seed=1)
  graphdef, state = nnx.split(model)
  trained, frozen = lora.partition(state)
  assert lora.partition(nnx.split(Transformer(CONFIG, rngs=nnx.Rngs(0)))[1])[1] is None  # no adapters: no split
  variables = lambda s: jax.tree.leaves(s, is_leaf=lambda x: isinstance(x, nnx.Variable))  # noqa: E731
  assert all(isinstance(v, nnx.LoRAParam) for v in variables(trained))
  assert not any(isinstance(v, nnx.LoRAParam) for v in variables(frozen))
  ids, mask = batch()

  def loss_fn(p, b):
    out = nnx.merge(graphdef, lora.combine(p, frozen))(b["ids"], b["mask"])[0]
    return jnp.sum(jax.nn.log_softmax(out)[..., 0] * b["mask"]), jnp.sum(b["mask"]).astype(jnp.float32), {}

  b = {"ids": ids, "mask": mask}
  grads = jax.grad(lambda p: loss_fn(p, b)[0])(trained)
  assert jax.tree.structure(grads) == jax.tree.structure(trained)  # gradients exist for the adapters alone
  # at B = 0, dL/dA = 0 (A's output is multiplied by B) and dL/dB != 0: LoRA's start (Hu et al. 2021)
  for path, g in jax.tree_util.tree_leaves_with_path(grads):
    assert (np.abs(np.asarray(g)).max() > 0) == (path[-2].key == "b"), path

  optimizer = optax.adamw(1e-2)
  opt_state = optimizer.init(trained)
  assert sum(x.size for x in jax.tree.leaves(opt_state)) == 2 * sum(x.size for x in jax.tree.leaves(trained)) + 1
  new, _, metrics = jax.jit(lambda p, o: gradient_step(loss_fn, optimizer, p, o, b))(trained, opt_state)
  assert int(metrics["skipped"]) == 0
  moved = jax.tree.map(lambda x, y: bool(jnp.any(x != y)), new, trained)
  assert all(jax.tree.leaves(moved))  # every adapter leaf moved (A through AdamW's weight decay at least)
  after = lora.combine(new, frozen)
  for (path, x), y in zip(jax.tree_util.tree_leaves_with_path(frozen), jax.tree.leaves(lora.partition(after)[1])):
    np.testing.assert_array_equal(np.asarray(x), np.asarray(y), err_msg=str(path))


def test_fold_moves_the_adapters_into_the_base_and_restarts_them():
  model = trained_like(lora.attach(Transformer(CONFIG, rngs=nnx.Rngs(0)), SPEC, seed=1))
  before, mask = logits(model)
  lora.fold(model)
  assert all(not np.any(np.asarray(a.b[...])) for a in lora.adapters_of(model).values())
  assert np.abs((logits(model)[0] - before) * mask[..., None]).max() < 1e-5


def test_dropout_acts_in_a_training_forward_only():
  spec = lora.LoraSpec(rank=4, alpha=8.0, dropout=0.5)
  model = trained_like(lora.attach(Transformer(CONFIG, rngs=nnx.Rngs(0)), spec, seed=1))
  graphdef, state = nnx.split(model)
  plain, _ = logits(model)
  np.testing.assert_array_equal(logits(nnx.merge(graphdef, state))[0], plain)  # deterministic without keys
  a = logits(lora.with_dropout(nnx.merge(graphdef, state), jax.random.key(0)))[0]
  b = logits(lora.with_dropout(nnx.merge(graphdef, state), jax.random.key(1)))[0]
  assert np.abs(a - plain).max() > 1e-3 and np.abs(a - b).max() > 1e-3
  assert not hasattr(lora.adapters_of(model)["q_proj"], "dropout_key")  # the run's model never holds keys


@pytest.mark.parametrize(
  "kwargs, words",
  [
    (dict(rank=0, alpha=16.0), "LoRA rank = 0: must be an integer >= 1"),
    (dict(rank=8, alpha=0.0), "LoRA alpha = 0.0: must be a number > 0"),
    (dict(rank=8, alpha=16.0, targets=("qproj",)), "unknown: 'qproj'"),
    (dict(rank=8, alpha=16.0, targets=()), "must be distinct names among q_proj"),
    (dict(rank=8, alpha=16.0, dropout=1.0), "LoRA dropout = 1.0: must be a number in [0, 1)"),
  ],
)
def test_bad_specs_are_refused_with_the_setting_named(kwargs, words):
  with pytest.raises(ValueError) as e:
    lora.LoraSpec(**kwargs)
  assert words in str(e.value)


def test_count_params_matches_the_adapters():
  model = lora.attach(Transformer(CONFIG, rngs=nnx.Rngs(0)), SPEC, seed=1)
  weights = {t: getattr(getattr(model.layers, w), t).shape for t, (w, _) in lora.TARGETS.items()}
  trained, _ = lora.partition(nnx.state(model))
  assert lora.count_params(SPEC, weights) == sum(x.size for x in jax.tree.leaves(trained))


@pytest.mark.parametrize("name", sorted(TINY_CONFIGS)[:1])
def test_export_merges_the_adapters_for_transformers_and_writes_them_apart(name, tmp_path):
  kind, overrides = TINY_CONFIGS[name]
  hf_model = make_hf_model(kind, **overrides)
  base_dir = save_hf_model(hf_model, tmp_path / "base")
  model = trained_like(lora.attach(load_hf(base_dir), SPEC, seed=1), size=0.05)
  adapted, mask = logits(model)
  save_hf(lora.merged(model), tmp_path / "merged")
  reloaded, _ = logits(load_hf(tmp_path / "merged"))
  assert np.abs((reloaded - adapted) * mask[..., None]).max() < 1e-5
  import transformers  # noqa: PLC0415

  merged_hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "merged")
  ids, _ = batch(model.config.vocab_size)
  assert np.abs((hf_logits(merged_hf, np.array(ids), mask.astype(np.int32)) - adapted) * mask[..., None]).max() < 1e-4

  # apart: peft's layout; W_hf + (alpha / r) B_hf A_hf is the merged checkpoint's tensor
  from safetensors.numpy import load_file  # noqa: PLC0415

  out = lora.save_adapters(model, tmp_path / "adapter")
  config = json.loads((out / "adapter_config.json").read_text())
  assert config["r"] == 4 and config["lora_alpha"] == 8.0 and config["target_modules"] == list(lora.TARGETS)
  tensors = load_file(out / "adapter_model.safetensors")
  merged_tensors = {**load_file(tmp_path / "merged" / "model.safetensors")}
  base_tensors = load_file(base_dir / "model.safetensors")
  for i in range(model.config.num_layers):
    for target, module in lora.HF_MODULES.items():
      prefix = f"model.layers.{i}.{module}.{target}"
      a, b = (tensors[f"base_model.model.{prefix}.lora_{x}.weight"] for x in "AB")
      assert a.shape[0] == 4 and b.shape[1] == 4
      np.testing.assert_allclose(
        base_tensors[f"{prefix}.weight"] + 2.0 * b @ a, merged_tensors[f"{prefix}.weight"], atol=1e-6
      )
