"""What a run logs to TensorBoard (genenv_jax/training/log_tags.py): no phantom values, no dead or duplicate tags,
k/G-aligned histograms, marked examples, eval accuracies with their standard errors."""

import dataclasses

import numpy as np
import pytest
from event_checks import constant_zero_and_duplicate_tags, text_table

from genenv_jax.coevolution.settings import AgentSettings, EnvSettings, GrpoSettings, PoolSettings, Settings
from genenv_jax.models.tokenizer import load_tokenizer
from genenv_jax.training import log_tags
from genenv_jax.training.metrics import MetricsWriter, read_descriptions, read_scalars, read_tensors

COEVOLVE = Settings(
  agent=AgentSettings(grpo=GrpoSettings(group_size=10)), env=EnvSettings(num_seeds=4), pools=PoolSettings(num_replay=2)
)


def step_metrics(**over):
  m = {
    "agent/reward_mean": 0.5,
    "agent/accuracy": 0.5,
    "agent/loss": 0.1,
    "agent/pg_loss": 0.09,
    "agent/kl_to_reference": 0.01,
    "agent/entropy": 1.2,
    "agent/groups_without_signal_frac": 0.3,
    "agent/adv_mean": 0.0,
    "agent/ratio_mean": 1.0,
    "agent/ratio_max": 1.0,
    "agent/ppo_clip_frac": 0.0,
    "agent/grad_norm_before_clip": 3.0,
    "agent/grad_clipped_frac": 1.0,
    "agent/update_norm": 0.01,
    "agent/tokens": 100.0,
    "agent/response_len": 3.0,
    "curriculum/p_hat_mean": 0.45,
    "curriculum/band_frac": 0.25,
    "curriculum/r_env_mean": 0.7,
    "curriculum/p_hat_0_or_1_frac": 0.25,
    "curriculum/invalid_frac": 0.25,
    "curriculum/difficulty_mean": 4.0,
    "env/tokens": 40.0,
    "env/output_len": 10.0,
    "env/rwr_nll": 1.5,
    "env/loss": 1.5,
    "env/kl_to_initial": 0.002,
    "env/kl_all": 0.002,
    "env/num_kept": 1.0,
    "env/rwr_weight_max": 1.0,
    "env/grad_norm_before_clip": 2.0,
    "env/grad_clipped_frac": 1.0,
    "env/update_norm": 0.02,
    "env/update_kl": 0.01,
    "env/kl_cap_scale": 1.0,
    "env/skipped": 0.0,
    "pool/train_size": 10.0,
    "pool/train_fill": 0.1,
    "pool/train_frac_seed": 0.8,
    "pool/train_frac_evaluated": 0.5,
    "pool/train_mean_p_hat": 0.6,
    "pool/env_size": 5.0,
    "pool/env_frac_seed": 1.0,
    "pool/env_frac_evaluated": 0.0,
    "pool/env_mean_p_hat": 0.0,
    "agent/skipped_updates": 0.0,
    "env/skipped_updates": 0.0,
  }
  m.update(over)
  return {k: np.float32(v) for k, v in m.items()}


def test_a_full_step_logs_each_quantity_once_under_its_topic():
  tags = log_tags.step_scalars(step_metrics(), COEVOLVE)
  assert {t.split("/")[0] for t in tags} == {"agent", "curriculum", "env", "pool"}
  for dropped in ("agent/accuracy", "agent/loss", "agent/adv_mean", "env/loss", "env/kl_all", "pool/train_fill"):
    assert dropped not in tags
  # D_env's share of measured tasks is 1 - its share of seeds (its seeds are never measured, its generated tasks
  # always are): logged once, as the share of seeds; D_train's replayed seeds get measured, so it has both
  assert "pool/env_frac_evaluated" not in tags and {"pool/env_frac_seed", "pool/train_frac_evaluated"} <= set(tags)
  assert tags["curriculum/p_hat_mean"] == pytest.approx(0.45) and tags["env/rwr_nll"] == 1.5
  assert tags["agent/kl_to_reference"] == pytest.approx(0.01) and tags["env/kl_to_initial"] == pytest.approx(0.002)
  assert tags["agent/grad_clipped_frac"] == 1.0 and tags["agent/grad_norm_before_clip"] == 3.0
  assert (tags["curriculum/band_low"], tags["curriculum/band_high"]) == pytest.approx((0.4, 0.6))


def test_a_step_without_an_env_update_logs_no_env_loss():
  no_update = {"env/num_kept": 0.0, "env/rwr_nll": 0.0, "curriculum/band_frac": 0.0}
  tags = log_tags.step_scalars(step_metrics(**no_update), COEVOLVE)
  assert not [t for t in tags if t.startswith("env/") and t != "env/output_len"]
  assert tags["curriculum/band_frac"] == 0.0  # genuinely none in the band: that is a measurement


def test_a_step_whose_env_tasks_are_all_invalid_logs_no_p_hat():
  tags = log_tags.step_scalars(step_metrics(**{"curriculum/invalid_frac": 1.0, "env/num_kept": 0.0}), COEVOLVE)
  assert tags["curriculum/invalid_frac"] == 1.0
  assert "curriculum/p_hat_mean" not in tags and "curriculum/band_frac" not in tags


def test_env_less_variants_log_no_env_or_curriculum_tags():
  grpo = dataclasses.replace(COEVOLVE, mode="grpo")
  tags = log_tags.step_scalars(step_metrics(), grpo)
  assert not [t for t in tags if t.startswith(("env/", "pool/env_", "curriculum/")) and "replay" not in t]
  random = dataclasses.replace(COEVOLVE, env=dataclasses.replace(COEVOLVE.env, train=False))
  tags = log_tags.step_scalars(step_metrics(), random)
  assert "curriculum/p_hat_mean" in tags and not [t for t in tags if t.startswith("env/") and t != "env/output_len"]


def test_ratio_and_ppo_clipping_only_with_several_minibatches():
  assert "agent/ratio_mean" not in log_tags.step_scalars(step_metrics(), COEVOLVE)
  tags = log_tags.step_scalars(
    step_metrics(), dataclasses.replace(COEVOLVE, agent=AgentSettings(grpo=GrpoSettings(group_size=10, minibatches=2)))
  )
  assert {"agent/ratio_mean", "agent/ratio_max", "agent/ppo_clip_frac"} <= set(tags)


def test_counters_and_empty_means_are_left_out_until_they_exist():
  tags = log_tags.step_scalars(step_metrics(), COEVOLVE)
  assert "agent/skipped_updates" not in tags and "pool/env_mean_p_hat" not in tags
  # no task written from a generated seed yet: NaN, left out
  split = {"curriculum/p_hat_mean_from_base_seeds": 0.7, "curriculum/p_hat_mean_from_generated_seeds": float("nan")}
  tags = log_tags.step_scalars(step_metrics(**split), COEVOLVE)
  assert tags["curriculum/p_hat_mean_from_base_seeds"] == pytest.approx(0.7)
  assert "curriculum/p_hat_mean_from_generated_seeds" not in tags
  assert tags["pool/train_mean_p_hat"] == pytest.approx(0.6)
  tags = log_tags.step_scalars(step_metrics(**{"agent/skipped_updates": 2.0}), COEVOLVE)
  assert tags["agent/skipped_updates"] == 2.0


def test_histogram_bins_are_centred_on_k_over_g():
  values = np.asarray([0.0, 0.1, 0.1, 0.5, 1.0])
  edges = log_tags.aligned_bin_edges(values, 0.1)
  np.testing.assert_allclose(edges[:3], [-0.05, 0.05, 0.15], atol=1e-9)
  counts, _ = np.histogram(values, edges)
  assert counts.sum() == 5 and counts[1] == 2 and counts[5] == 1 and counts[-1] == 1  # one value per bin centre


def stub_run(settings=COEVOLVE):
  """What log_step and log_perf read of a Run: the tokenizer, the domain's gold answers, the settings."""

  class Domain:
    def gold_answer(self, spec):
      return str(int(spec[0]))

  class Run:
    tokenizer, domain = load_tokenizer(), Domain()

    class coevolution:  # noqa: N801
      pass

  Run.coevolution.settings = settings
  return Run()


def with_histograms_and_examples(metrics, tok):
  metrics.update(
    {
      "curriculum/p_hat": np.asarray([0.5, 0.2, 0.2, -1.0]),
      "curriculum/difficulty": np.asarray([2.0, 3.0, 3.0, -1.0]),
      "examples/prompt_ids": np.asarray([tok.encode("Compute: 3+4 ="), tok.encode("Compute: 1+1 =")]),
      "examples/env_tokens": np.asarray([tok.encode("3+4"), tok.encode("1+1")]),
      "examples/spec": np.asarray([[7], [2]]),
      "examples/difficulty": np.asarray([1.0, 1.0]),
      "examples/valid": np.asarray([True, True]),
      "examples/p_hat": np.asarray([0.5, 0.2]),
      "examples/response": np.asarray([tok.encode("7"), tok.encode("3")]),
      "examples/reward": np.asarray([1.0, 0.0]),
    }
  )
  return metrics


PHASES = {"wall": 2.5, "step": 2.0, "eval": 0.5, "checkpoint": 0.0, "log": 0.0}


def test_log_step_writes_aligned_histograms_and_a_marked_examples_table(tmp_path):
  run = stub_run()
  metrics = with_histograms_and_examples(step_metrics(), run.tokenizer)
  with MetricsWriter(str(tmp_path)) as writer:
    log_tags.log_step(writer, run, 5, metrics, {})
    log_tags.log_perf(writer, run, 5, metrics, PHASES)
  assert read_scalars(str(tmp_path))["perf/agent_tokens_per_s"][0][1] == pytest.approx(50.0)
  buckets = np.asarray(read_tensors(str(tmp_path), "histograms")["curriculum/p_hat"][0][1])
  assert buckets[:, 2].sum() == 3  # the invalid task (-1) is left out
  centres = (buckets[:, 0] + buckets[:, 1]) / 2
  np.testing.assert_allclose(centres[buckets[:, 2] > 0], [0.2, 0.5], atol=1e-6)
  table = text_table(str(tmp_path), "curriculum/examples")
  assert all(table[0]) and table[0][-1] == "success"  # every column headed
  assert table.shape == (3, 8) and "'7'" in table[1] and "✓" in table[1] and "✗" in table[2] and "'2'" in table[2]


def every_step_tag_at_once():
  """Metrics under which step_scalars writes every tag it can: each gating group open at once (several mini-batches,
  an env update, valid fresh tasks from both kinds of seed, measured tasks in both pools, skipped updates)."""
  names = [*log_tags.ALWAYS, *log_tags.OFF_POLICY, *log_tags.FRESH_TASKS, *log_tags.ENV_WRITES, *log_tags.ENV_UPDATE]
  names += [*log_tags.COUNTERS, *(f"pool/{p}_{stat}" for p, stats in log_tags.POOL_STATS.items() for stat in stats)]
  metrics = step_metrics(**{name: 0.5 for name in names}, **{"pool/env_frac_evaluated": 0.5})
  settings = dataclasses.replace(COEVOLVE, agent=AgentSettings(grpo=GrpoSettings(group_size=10, minibatches=2)))
  return names, metrics, settings


def test_every_tag_a_run_writes_carries_its_one_line_description(tmp_path):
  names, metrics, settings = every_step_tag_at_once()
  assert set(names) <= set(log_tags.step_scalars(metrics, settings))
  run = stub_run(settings)
  metrics = with_histograms_and_examples(metrics, run.tokenizer)
  metrics["env/tokens"] = np.float32(40.0)
  eval_result = {"accuracy": 0.5, "n": 100, "by_difficulty": {"2": 0.8, "3": 0.2}, "n_by_difficulty": {"2": 50}}
  with MetricsWriter(str(tmp_path), describe=log_tags.description) as writer:
    log_tags.log_run_start(writer, "config", settings)
    writer.scalars(1, {"warm_start/agent_loss": 1.0, "warm_start/env_loss": 1.0})  # training.loop's warm start
    log_tags.log_step(writer, run, 5, metrics, {"agent/lr": 1e-5, "env/lr": 1e-6})  # training.loop.learning_rates
    log_tags.log_perf(writer, run, 5, metrics, PHASES)
    log_tags.log_eval(writer, 5, eval_result)
  written = read_descriptions(str(tmp_path))
  missing = sorted(tag for tag, text in written.items() if not text)
  assert missing == [], f"tags without a description (training/log_tags.py DESCRIPTIONS): {missing}"
  assert all(written[tag] == log_tags.description(tag) for tag in written)
  assert written["eval/accuracy_difficulty_3"] == log_tags.DESCRIPTIONS["eval/accuracy_difficulty_*"]
  # and no description is left over for a tag that nothing writes (only the device's memory needs a GPU or a TPU)
  unwritten = {k for k in log_tags.DESCRIPTIONS if k not in written and not k.endswith("*")}
  assert unwritten <= {"perf/device_peak_memory_gib"}, unwritten


def test_descriptions_are_single_short_lines():
  for tag, text in log_tags.DESCRIPTIONS.items():
    assert text and "\n" not in text and len(text) <= 100 and text == text.strip(), tag
  assert log_tags.description("eval/accuracy_difficulty_7") and log_tags.description("no/such_tag") is None


def test_log_eval_writes_the_standard_error_and_item_counts(tmp_path):
  result = {"accuracy": 0.5, "n": 100, "by_difficulty": {"2": 0.8, "3": 0.2}, "n_by_difficulty": {"2": 50, "3": 50}}
  with MetricsWriter(str(tmp_path)) as writer:
    log_tags.log_eval(writer, 10, result)
  scalars = read_scalars(str(tmp_path))
  assert scalars["eval/accuracy_se"][0][1] == pytest.approx(0.05)
  table = text_table(str(tmp_path), "eval/by_difficulty")
  assert list(table[2]) == ["2", "50", "0.800", "0.057"]


def test_the_constant_zero_and_duplicate_detector_finds_both():
  zero, dups = constant_zero_and_duplicate_tags(
    {"a": [(1, 0.0), (2, 0.0)], "b": [(1, 1.0), (2, 2.0)], "c": [(1, 1.0), (2, 2.0)], "d": [(1, 1.0), (2, 1.0)]}
  )
  assert zero == ["a"] and dups == [("b", "c")]


def test_the_alpha_band_is_a_shaded_margin_chart_under_mean_p_hat(tmp_path):
  from tensorboard.plugins.custom_scalar import layout_pb2

  with MetricsWriter(str(tmp_path)) as writer:
    log_tags.log_run_start(writer, "config", COEVOLVE)
  [(_, value)] = read_tensors(str(tmp_path), "custom_scalars")["custom_scalars__config__"]
  [category] = layout_pb2.Layout.FromString(value.item()).category
  [chart] = category.chart
  [series] = chart.margin.series
  assert (series.value, series.lower, series.upper) == (
    "curriculum/p_hat_mean",
    "curriculum/band_low",
    "curriculum/band_high",
  )
  assert not chart.multiline.tag  # a band, not two more lines


def test_phase_times_add_up_to_the_wall_time_per_step():
  from genenv_jax.training.loop import PhaseTimes

  now = [0.0]
  times = PhaseTimes(clock=lambda: now[0])
  for _ in range(5):  # five steps of 1 s, one evaluation of 2 s, a checkpoint of 0.5 s at each step
    now[0] += 1.0
    times.steps += 1
    with times.phase("checkpoint"):
      now[0] += 0.5
  with times.phase("eval"):
    now[0] += 2.0
  per = times.per_step()
  assert per == pytest.approx({"wall": 1.9, "step": 1.0, "eval": 0.4, "checkpoint": 0.5, "log": 0.0})
  assert per["step"] + per["eval"] + per["checkpoint"] + per["log"] == pytest.approx(per["wall"])
