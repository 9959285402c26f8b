"""Test helpers: the kinds of damage a checkpoint step directory (orbax 0.12.8's layout) can suffer, each made in
place on STEP_DIR."""

import glob
import os
import random


def array_files(step_dir: str) -> list[str]:
  """The step's array data files (its process's OCDBT data files, not the root b-tree's), largest first."""
  files = [p for p in glob.glob(os.path.join(step_dir, "state", "ocdbt.process_*", "d", "*")) if os.path.isfile(p)]
  return sorted(files, key=os.path.getsize, reverse=True)


def random_bytes(step_dir: str) -> None:
  rng = random.Random(0)
  for path in array_files(step_dir)[:3]:
    size = os.path.getsize(path)
    with open(path, "wb") as f:
      f.write(bytes(rng.randrange(256) for _ in range(size)))


def truncated(step_dir: str) -> None:
  path = array_files(step_dir)[0]
  os.truncate(path, os.path.getsize(path) // 2)


def missing(step_dir: str) -> None:
  os.remove(array_files(step_dir)[0])


def bad_manifest(step_dir: str) -> None:
  with open(os.path.join(step_dir, "state", "manifest.ocdbt"), "wb") as f:
    f.write(b"not a manifest")


def bad_metadata(step_dir: str, name: str = "state/_METADATA") -> None:
  with open(os.path.join(step_dir, name), "w") as f:
    f.write("{not json")
