"""Every module of the package imports in one process: no two programs' absl flags collide, no import-time side
effects need data or devices. (CI once failed at collection because two CLI modules both defined --config.)"""

import importlib
import pkgutil

import genenv_jax


def test_every_module_imports_together():
  names = [m.name for m in pkgutil.walk_packages(genenv_jax.__path__, "genenv_jax.") if not m.name.endswith("__main__")]
  assert len(names) > 20
  for name in names:
    importlib.import_module(name)
