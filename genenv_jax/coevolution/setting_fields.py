"""The settings tree's machinery (coevolution/settings.py declares the sections): tests of one value, a field with its
default, test and allowed values (`setting`), a nested section (`section`), a section that checks itself (`Section`),
the walk over a ConfigDict that lists every bad value (`read`), and its inverse for the config files (`to_config`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable, Mapping

import ml_collections

from genenv_jax.models.config import REMAT_POLICIES
from genenv_jax.sampling.sampler import SamplingParams


class SettingsError(ValueError):
  """Settings with bad values; the message lists every one, a line each ("key = value: must be ...")."""


# ---- tests of one value -----------------------------------------------------------------------------------------


def is_int(v: Any) -> bool:
  return isinstance(v, int) and not isinstance(v, bool)


def is_real(v: Any) -> bool:
  return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def positive(v: Any) -> bool:
  return is_real(v) and v > 0


def non_negative(v: Any) -> bool:
  return is_real(v) and v >= 0


def unit(v: Any) -> bool:
  return is_real(v) and 0 <= v <= 1


def boolean(v: Any) -> bool:
  return isinstance(v, bool)


def is_text(v: Any) -> bool:
  return isinstance(v, str)


def remat_setting(v: Any) -> bool:
  return isinstance(v, bool) or v in REMAT_POLICIES


def count(minimum: int) -> Callable[[Any], bool]:
  return lambda v: is_int(v) and v >= minimum


def choice(options: Iterable[str]) -> tuple[Callable[[Any], bool], str]:
  """(test, allowed) for a value that must be one of `options` (a registry's keys or a tuple of names)."""
  options = tuple(options)
  return (lambda v: v in options), "one of " + ", ".join(repr(o) for o in options)


def mix(v: Any) -> bool:
  """Non-negative fractions that sum to 1 (the pools' (base, old, new) draws)."""
  values = list(v) if isinstance(v, (list, tuple)) else None
  return bool(values) and all(non_negative(x) for x in values) and abs(sum(values) - 1.0) <= 1e-6


MIX = "non-negative fractions that sum to 1"


# ---- the machinery: a field with its test, a nested section, the walk over a ConfigDict ---------------------------


def setting(default: Any, test: Callable[[Any], bool], allowed: str, convert: Callable | None = None) -> Any:
  """A settings field: its one default, the test a value must pass, and the words for what it allows. `convert`
  normalises a config's value (a JSON list -> tuple) before the test."""
  return dataclasses.field(default=default, metadata={"test": test, "allowed": allowed, "convert": convert})


def section(cls: type, **defaults: Any) -> Any:
  """A nested section (its own dataclass), defaulting to `cls(**defaults)`."""
  return dataclasses.field(default_factory=lambda: cls(**defaults), metadata={"section": cls, "defaults": defaults})


# the sampling keys a config's sampling section holds; the others come from the domain and the tokenizer
SAMPLING_KEYS = ("temperature", "top_k", "top_p", "prefill_rows", "kv_cache")


def sampling_field(max_new_tokens: int) -> Any:
  """A `SamplingParams` field (the sampler's own frozen settings); `max_new_tokens` only for a tree built in code."""
  return dataclasses.field(
    default_factory=lambda: SamplingParams(max_new_tokens=max_new_tokens), metadata={"sampling": True}
  )


class Section:
  """A frozen settings dataclass that checks itself: every field's test, then `constraints` between its fields."""

  def __post_init__(self):
    found = self.problems_of({f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
    if found:
      raise SettingsError(f"invalid {type(self).__name__}:\n  " + "\n  ".join(found))

  @classmethod
  def problems_of(cls, values: Mapping[str, Any], path: str = "") -> list[str]:
    """Every bad value among `values` (field -> value), each named by its config key (`path` + field); the
    constraints between fields once each field passes its own test."""
    return cls.field_problems(values, path) or cls.constraints(values, path)

  @classmethod
  def field_problems(cls, values: Mapping[str, Any], path: str = "") -> list[str]:
    """The values among `values` that fail their field's own test."""
    out = []
    for f in dataclasses.fields(cls):
      test = f.metadata.get("test")
      if test is not None and f.name in values and not test(values[f.name]):
        out.append(f"{path}{f.name} = {values[f.name]!r}: must be {f.metadata['allowed']}")
    return out

  @classmethod
  def constraints(cls, values: Mapping[str, Any], path: str) -> list[str]:
    """Problems between this section's fields (called once each field passes its own test)."""
    return []


def read(
  cls: type,
  node: Any,
  path: str,
  fixed: Mapping[str, Mapping[str, Any]],
  out: list[str],
  defaults: Mapping[str, Any] | None = None,
) -> Any:
  """`cls` from the config node at `path` (None where a value is bad; its problem appended to `out`). `fixed` holds
  values from outside the config (by field path), `defaults` a parent's defaults for fields the node lacks."""
  values: dict[str, Any] = dict(defaults or {})
  bad_parts = False
  for f in dataclasses.fields(cls):
    present = node is not None and f.name in node
    if "section" in f.metadata:
      sub = node[f.name] if present else None
      defaults = {k: v for k, v in f.metadata["defaults"].items() if sub is None or k not in sub}
      part = read(f.metadata["section"], sub, f"{path}{f.name}.", fixed, out, defaults)
    elif "sampling" in f.metadata:
      sub = node[f.name] if present else {}
      given = {k: sub[k] for k in SAMPLING_KEYS if k in sub}
      try:
        part = dataclasses.replace(f.default_factory(), **given, **fixed.get(f"{path}{f.name}", {}))
      except (TypeError, ValueError) as e:  # the sampler's own check
        out.append(f"{path}{f.name}: {e}")
        part = None
    elif present:
      convert = f.metadata.get("convert")
      part = convert(node[f.name]) if convert is not None and node[f.name] is not None else node[f.name]
    else:
      continue
    bad_parts |= part is None
    values[f.name] = part
  if bad_parts:  # this section's own fields still checked; its constraints need every part
    out.extend(cls.field_problems(values, path))
    return None
  found = cls.problems_of(values, path)
  out.extend(found)
  return None if found else cls(**values)


def to_config(settings: Any) -> ml_collections.ConfigDict:
  """A section as the ConfigDict a config file holds (its sampling as the config's sampling keys only)."""
  out = {}
  for f in dataclasses.fields(settings):
    value = getattr(settings, f.name)
    if "section" in f.metadata:
      out[f.name] = to_config(value)
    elif "sampling" in f.metadata:
      out[f.name] = ml_collections.ConfigDict({k: getattr(value, k) for k in SAMPLING_KEYS})
    else:
      out[f.name] = value
  return ml_collections.ConfigDict(out)
