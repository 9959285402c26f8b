"""Every module of the package imports in one process: no two programs' absl flags collide, no import-time side
effects need data or devices. (CI once failed at collection because two CLI modules both defined --config.)"""

import importlib
import pkgutil

import pytest

import genenv_jax


def test_every_module_imports_together():
  names = [m.name for m in pkgutil.walk_packages(genenv_jax.__path__, "genenv_jax.") if not m.name.endswith("__main__")]
  assert len(names) > 20
  for name in names:
    importlib.import_module(name)


def _modules_loaded_by(statement: str) -> set[str]:
  import subprocess
  import sys

  code = f"import sys; {statement}; print('\\n'.join(sorted(sys.modules)))"
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
  return set(out.split())


def test_low_rooms_load_no_model_code():
  """`import genenv_jax.data` (and `python -m genenv_jax.data`) or `import genenv_jax.parallel` loads neither the
  decoder nor flax: the package's __init__ is lazy."""
  for room in ("genenv_jax.data", "genenv_jax.parallel"):
    loaded = _modules_loaded_by(f"import {room}")
    assert room in loaded
    assert not any(m.startswith(("genenv_jax.models", "genenv_jax.sampling", "flax")) for m in loaded), room


def test_model_api_names_load_on_first_use():
  loaded = _modules_loaded_by("import genenv_jax as gj; gj.ModelConfig; gj.generate")
  assert {"genenv_jax.models.config", "genenv_jax.sampling.sampler"} <= loaded
  import genenv_jax as gj

  assert {"load_hf", "generate", "make_mesh"} <= set(dir(gj))
  with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
    _ = gj.no_such_name
