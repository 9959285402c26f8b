"""Config validation before any work: every bad value of a run's config, listed at once.

`problems(config)` returns one line per bad value: its key path, its value and what is allowed. `validate(config)`
raises `ConfigError` listing them all. The CLIs (`main`, `plan`, `sweep`) call it right after the flags are parsed,
before anything is built, compiled or warm-started, and exit with status 2 on a `ConfigError`.

Every section of the config (the schedule, the mesh, the tokenizer, the domain, both models, the step's and the warm
start's sections) is declared, defaulted and checked once, in the settings tree (coevolution/settings.py), and
`settings.problems` lists its bad values, those that span sections included (the rows each phase samples against
the mini-batches, the warm start's env targets against the domain: `Settings.constraints`). This module is what the
commands call: the one error listing them all. A key that a config does not have takes the tree's default (older
configs). The domain's lengths against its longest task are checked when the domain is built (`tasks`: the first
thing `build` does), before any model exists.
"""

from __future__ import annotations

import ml_collections

from genenv_jax.coevolution import settings


class ConfigError(ValueError):
  """A config with bad values; the message lists every one, a line each."""


def problems(config: ml_collections.ConfigDict) -> list[str]:
  """Every bad value of `config`, one line each ("key = value: allowed"); empty when the config is valid."""
  return settings.problems(config)


def validate(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError listing every bad value of `config` (see `problems`)."""
  found = problems(config)
  if found:
    raise ConfigError(
      f"invalid config ({len(found)} bad value{'s' if len(found) > 1 else ''}; fix them with --config.KEY=VALUE):\n  "
      + "\n  ".join(found)
    )
