"""The sampler: KV-cache decoding against a full forward, greedy against transformers' generate, sampling controls."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hf_models import make_hf_model, save_hf_model, torch

import genenv_jax as gj
from genenv_jax.models.transformer import init_cache
from genenv_jax.sampling.sampler import filter_logits

EOS = 2


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
  hf_model = make_hf_model("qwen2", num_attention_heads=4, num_key_value_heads=2)
  path = save_hf_model(hf_model, tmp_path_factory.mktemp("qwen2"))
  return hf_model, gj.load_hf(path)


def prompts(seed=0, batch=4, length=7):
  rng = np.random.RandomState(seed)
  ids = rng.randint(3, 101, size=(batch, length)).astype(np.int32)
  mask = np.ones_like(ids)
  mask[1, :3] = 0
  mask[3, :5] = 0
  return ids * mask, mask


def test_incremental_cache_decoding_matches_full_forward(tiny):
  _, model = tiny
  ids, mask = prompts(length=10)
  full = np.asarray(gj.forward(model, ids, mask))
  cache = init_cache(model.config, ids.shape[0], 16)
  logits_p, cache = model(jnp.asarray(ids[:, :6]), jnp.asarray(mask[:, :6]), cache=cache)
  steps = [logits_p]
  for t in range(6, 10):
    logits_t, cache = model(jnp.asarray(ids[:, t : t + 1]), jnp.asarray(mask[:, t : t + 1]), cache=cache)
    steps.append(logits_t)
  incremental = np.concatenate([np.asarray(s) for s in steps], axis=1)
  np.testing.assert_allclose(incremental * mask[..., None], full * mask[..., None], atol=1e-4)


def test_greedy_generation_equals_transformers_generate(tiny):
  hf_model, model = tiny
  ids, mask = prompts()
  out = gj.generate(model, ids, mask, max_new_tokens=12, temperature=0.0, eos_ids=(), key=jax.random.key(0))
  with torch.no_grad():
    ref = hf_model.generate(
      input_ids=torch.as_tensor(ids),
      attention_mask=torch.as_tensor(mask),
      max_new_tokens=12,
      do_sample=False,
      eos_token_id=None,
      pad_token_id=0,
      min_new_tokens=12,
    ).numpy()
  np.testing.assert_array_equal(np.asarray(out.tokens), ref[:, ids.shape[1] :])
  assert np.asarray(out.mask).all()
  # the returned log-probs are log softmax of the logits at the chosen tokens
  seq = np.concatenate([ids, np.asarray(out.tokens)], 1)
  full_mask = np.concatenate([mask, np.ones_like(np.asarray(out.tokens))], 1)
  logp = jax.nn.log_softmax(gj.forward(model, seq, full_mask), -1)
  expected = np.take_along_axis(np.asarray(logp)[:, ids.shape[1] - 1 : -1], np.asarray(out.tokens)[..., None], -1)[
    ..., 0
  ]
  np.testing.assert_allclose(np.asarray(out.logprobs), expected, atol=1e-4)


def test_stops_per_row_on_any_eos(tiny):
  _, model = tiny
  ids, mask = prompts()
  greedy = np.asarray(gj.generate(model, ids, mask, max_new_tokens=10, temperature=0.0).tokens)
  stop_ids = (int(greedy[0, 2]), int(greedy[1, 4]))  # make two rows stop early on two different "EOS" ids
  out = gj.generate(model, ids, mask, max_new_tokens=10, temperature=0.0, eos_ids=stop_ids, pad_id=0)
  tokens, out_mask = np.asarray(out.tokens), np.asarray(out.mask)
  for row in range(ids.shape[0]):
    hits = np.nonzero(np.isin(greedy[row], stop_ids))[0]
    n = hits[0] + 1 if len(hits) else 10
    assert out_mask[row].sum() == n
    np.testing.assert_array_equal(tokens[row, :n], greedy[row, :n])
    assert (tokens[row, n:] == 0).all() and (np.asarray(out.logprobs)[row, n:] == 0).all()


def test_sampling_is_deterministic_per_key_and_varies_across_keys(tiny):
  _, model = tiny
  ids, mask = prompts()
  kw = dict(max_new_tokens=8, temperature=1.0, top_k=20, top_p=0.9)
  a = gj.generate(model, ids, mask, key=jax.random.key(1), **kw)
  b = gj.generate(model, ids, mask, key=jax.random.key(1), **kw)
  c = gj.generate(model, ids, mask, key=jax.random.key(2), **kw)
  np.testing.assert_array_equal(np.asarray(a.tokens), np.asarray(b.tokens))
  assert not np.array_equal(np.asarray(a.tokens), np.asarray(c.tokens))


def test_top_k_and_top_p_filtering():
  logits = jnp.log(jnp.asarray([[0.5, 0.3, 0.15, 0.05]]))
  k2 = np.asarray(filter_logits(logits, top_k=2, top_p=1.0))
  assert np.isfinite(k2[0, :2]).all() and (k2[0, 2:] < -1e30).all()
  p = np.asarray(filter_logits(logits, top_k=0, top_p=0.7))  # 0.5 < 0.7 <= 0.8: keep the top two
  assert (p[0, :2] > -1e30).all() and (p[0, 2:] < -1e30).all()
  p_all = np.asarray(filter_logits(logits, top_k=0, top_p=0.99))
  assert (p_all > -1e30).all()


def test_top_k_one_equals_greedy(tiny):
  _, model = tiny
  ids, mask = prompts()
  greedy = gj.generate(model, ids, mask, max_new_tokens=6, temperature=0.0)
  k1 = gj.generate(model, ids, mask, max_new_tokens=6, temperature=0.7, top_k=1, key=jax.random.key(5))
  np.testing.assert_array_equal(np.asarray(greedy.tokens), np.asarray(k1.tokens))


def test_prompt_lengths_in_one_bucket_share_a_compilation(tiny):
  from genenv_jax.sampling import sampler

  _, model = tiny
  before = sampler._prefill_jit._cache_size()
  for length in (5, 9, 13):
    ids, mask = prompts(length=length)
    gj.generate(model, ids, mask, max_new_tokens=4, temperature=0.0, buckets=(16,))
  assert sampler._prefill_jit._cache_size() - before <= 1


def test_over_long_prompt_is_rejected_clearly(tiny):
  _, model = tiny
  ids, mask = prompts(length=250)
  with pytest.raises(ValueError, match=r"exceeds the cache limit of 256 tokens"):
    gj.generate(model, ids, mask, max_new_tokens=10)
  with pytest.raises(ValueError, match="max_new_tokens must be positive"):
    gj.generate(model, ids, mask, max_new_tokens=0)


def _kept_set(z, top_k, top_p):
  """The kept set by its definition, one row at a time in float64: ties of the k-th largest stay; then, in decreasing
  order, the tokens whose softmax mass before them (over the top-k set) is < p, and the ties of the last one."""
  z = np.asarray(z, np.float64)
  keep = np.ones(z.shape, bool)
  if top_k:
    keep = z >= np.sort(z)[::-1][top_k - 1]
  if top_p < 1:
    p = np.where(keep, np.exp(z - z[keep].max()), 0.0)
    p /= p.sum()
    order = np.argsort(-z, kind="stable")
    before = np.cumsum(p[order]) - p[order]
    cutoff = z[order][before < top_p].min()
    keep &= z >= cutoff
  return keep


@pytest.mark.parametrize("top_k,top_p", [(3, 1.0), (0, 0.6), (3, 0.6), (4, 0.9), (1, 1.0)])
def test_filter_keeps_every_tie_of_the_kth_value_and_matches_the_definition(top_k, top_p):
  rng = np.random.RandomState(0)
  logits = np.round(rng.randn(6, 12), 0).astype(np.float32)  # rounded: many ties, at the k-th value too
  logits[0] = [2, 1, 1, 1, 0, 0, 0, 0, -1, -1, -1, -1]  # the 3rd largest is tied three times
  got = np.asarray(filter_logits(jnp.asarray(logits), top_k, top_p)) > jnp.finfo(jnp.float32).min
  want = np.stack([_kept_set(z, top_k, top_p) for z in logits])
  np.testing.assert_array_equal(got, want)
  if top_k == 3 and top_p == 1.0:
    assert got[0].sum() == 4  # 2 and all three 1s: more than k, whatever the ids' order


def test_policy_logprobs_are_the_renormalised_filtered_distribution_and_its_gradient():
  """log π(y) = z_y/T - logsumexp over the kept set; d/dz is (onehot(y) - π)/T on the kept set and 0 outside it."""
  from genenv_jax.sampling.sampler import SamplingParams, policy_logprobs

  z = jnp.asarray([[3.0, 2.0, 1.0, 0.5, -1.0, 0.2]])
  params = SamplingParams(max_new_tokens=1, temperature=0.5, top_k=3)  # K = {0, 1, 2}
  y = jnp.asarray([1])
  logp, policy = policy_logprobs(z, y, params)
  zk = np.asarray(z[0, :3]) / 0.5
  want = zk[1] - np.log(np.exp(zk).sum())
  np.testing.assert_allclose(float(logp[0]), want, rtol=1e-6)
  np.testing.assert_allclose(float(jax.nn.logsumexp(policy)), np.log(np.exp(zk).sum()), rtol=1e-6)
  grad = np.asarray(jax.grad(lambda x: policy_logprobs(x, y, params)[0].sum())(z))[0]
  pi = np.exp(zk - np.log(np.exp(zk).sum()))
  np.testing.assert_allclose(grad[:3], (np.eye(3)[1] - pi) / 0.5, atol=1e-6)
  np.testing.assert_array_equal(grad[3:], 0.0)
  # a token outside K (another model's K) is scored over K and itself: finite, never -inf
  out, _ = policy_logprobs(z, jnp.asarray([4]), params)
  np.testing.assert_allclose(float(out[0]), -2.0 - np.log(np.exp(zk).sum() + np.exp(-2.0)), rtol=1e-6)
  with pytest.raises(ValueError, match="top_k must be >= 0"):
    filter_logits(z, -1, 1.0)
