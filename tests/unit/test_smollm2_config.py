"""configs/smollm2.py without the model (issue 40, item 4): the model file is resolved from the data directory as
`fetch smollm2` lays it out, its absence stops the config with the error that names the fetch command, and the
variants are valid and compose (static and grpo train on as many tasks a step as coevolve). The real-model step is
tests/integration/test_smollm2_step.py."""

import pytest

from configs import smollm2
from genenv_jax.data import DataMissingError
from genenv_jax.training.config_checks import problems


@pytest.fixture
def data_dir(tmp_path, monkeypatch):
  """A data directory with stand-ins for the two files of the smollm2 dataset (the config checks presence only)."""
  (tmp_path / "smollm2").mkdir()
  for name in ("SmolLM2-135M-Instruct.Q4_1.gguf", "LICENSE"):
    (tmp_path / "smollm2" / name).write_bytes(b"stand-in")
  monkeypatch.setenv("GENENV_DATA", str(tmp_path))
  return tmp_path


def test_an_absent_model_names_the_fetch_command(tmp_path, monkeypatch):
  monkeypatch.setenv("GENENV_DATA", str(tmp_path / "empty"))
  with pytest.raises(DataMissingError, match=r"\(smollm2\) is missing: .*fetch smollm2 --data_dir .*empty"):
    smollm2.get_config("")


def test_the_model_and_tokenizer_come_from_the_data_directory(data_dir):
  c = smollm2.get_config("")
  path = str(data_dir / "smollm2" / "SmolLM2-135M-Instruct.Q4_1.gguf")
  assert c.agent.model.hf_path == c.env.model.hf_path == c.tokenizer == path
  assert c.warm_start.agent_steps > 0 and c.warm_start.env_steps > 0  # a real checkpoint warm-started on the format
  assert c.agent.lora.enabled and c.env.lora.enabled


@pytest.mark.parametrize(
  "variant", ["", "coevolve", "random", "static", "grpo", "smoke", "smoke+random", "static+smoke", "api_bank"]
)
def test_the_variants_are_valid(data_dir, variant):
  assert problems(smollm2.get_config(variant)) == []


def test_the_variants_compose_and_keep_the_agents_tasks_per_step(data_dir):
  def tasks(c):
    return (c.env.num_seeds * c.env.samples_per_seed if c.mode == "coevolve" else 0) + c.pools.num_replay

  base, smoke = smollm2.get_config(""), smollm2.get_config("smoke")
  for variant in ("static", "grpo"):
    assert tasks(smollm2.get_config(variant)) == tasks(base)
    assert (
      tasks(smollm2.get_config(f"smoke+{variant}")) == tasks(smollm2.get_config(f"{variant}+smoke")) == tasks(smoke)
    )
  assert smollm2.get_config("smoke+random").env.train is False and smollm2.get_config("random").total_steps == 80
  with pytest.raises(ValueError, match="unknown variant 'pooled' of configs/smollm2.py"):
    smollm2.get_config("pooled")


def test_api_bank_sets_the_domain_in_the_models_tokens_and_composes(data_dir):
  c = smollm2.get_config("api_bank")
  assert c.domain.name == "api_bank" and c.domain.data_dir == ""  # the data directory's api_bank (fetch api_bank)
  assert {k: c.domain[k] for k in smollm2.API_BANK_LENGTHS} == smollm2.API_BANK_LENGTHS
  assert c.agent.model.hf_path == c.env.model.hf_path == c.tokenizer  # still SmolLM2, LoRA on, warm-started
  assert c.agent.lora.enabled and c.env.lora.enabled and c.warm_start.env_steps > 0
  assert c.total_steps < smollm2.get_config("").total_steps
  # the domain is applied first wherever it is named, so static / grpo keep coevolve's tasks a step on API-Bank too
  for other in ("static", "grpo", "smoke", "random"):
    a, b = smollm2.get_config(f"api_bank+{other}"), smollm2.get_config(f"{other}+api_bank")
    assert a.to_json() == b.to_json() and a.domain.name == "api_bank" and problems(a) == []

  def tasks(c):
    return (c.env.num_seeds * c.env.samples_per_seed if c.mode == "coevolve" else 0) + c.pools.num_replay

  assert tasks(smollm2.get_config("api_bank+static")) == tasks(smollm2.get_config("api_bank+grpo")) == tasks(c)
