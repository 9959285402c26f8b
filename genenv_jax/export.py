"""CLI: python -m genenv_jax.export --workdir RUN --out DIR [--model agent|env]

Writes the trained agent (or env) of a run's latest checkpoint as an HF checkpoint directory (config.json +
safetensors) that transformers' `from_pretrained`, and so any HF-compatible server, loads. When the run used an HF
tokenizer directory its tokenizer files are copied beside the weights; a sentencepiece `.model` is copied as is.
"""

from __future__ import annotations

import argparse
import pathlib
import shutil
import sys
from typing import Sequence

TOKENIZER_FILES = (
  "tokenizer.json",
  "tokenizer_config.json",
  "special_tokens_map.json",
  "generation_config.json",
  "vocab.json",
  "merges.txt",
  "tokenizer.model",
  "chat_template.jinja",
)


def copy_tokenizer(source: pathlib.Path, out: pathlib.Path) -> list[str]:
  """Copies the tokenizer files of `source` (an HF directory or a sentencepiece file) into `out`."""
  if source.is_file():
    shutil.copy2(source, out / source.name)
    return [source.name]
  copied = [name for name in TOKENIZER_FILES if (source / name).is_file()]
  for name in copied:
    shutil.copy2(source / name, out / name)
  return copied


def main(argv: Sequence[str] | None = None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--workdir", required=True, help="a training run's workdir (summary.json + checkpoints/)")
  parser.add_argument("--out", required=True, help="the HF checkpoint directory to write")
  parser.add_argument("--model", choices=("agent", "env"), default="agent")
  args = parser.parse_args(argv)
  from genenv_jax.evaluation.agents import load_workdir  # pylint: disable=import-outside-toplevel
  from genenv_jax.models.hf import save_hf  # pylint: disable=import-outside-toplevel

  try:
    model, tokenizer, step = load_workdir(args.workdir, which=args.model)
  except (FileNotFoundError, ValueError) as e:
    print(f"error: {e}", file=sys.stderr)
    return 2
  out = save_hf(model, args.out)
  copied = copy_tokenizer(pathlib.Path(tokenizer.path), out)
  print(f"wrote the {args.model} at step {step} to {out} (tokenizer files: {', '.join(copied) or 'none'})")
  return 0


if __name__ == "__main__":
  sys.exit(main())
