"""CLI: python -m genenv_jax.export --workdir=RUN --out=DIR [--role=agent|env] [--overwrite] [--lora_adapters]

Writes the trained agent (or env) of a run's latest checkpoint as an HF checkpoint directory (config.json +
safetensors) that transformers' `from_pretrained`, and so any HF-compatible server, loads. When the run used an HF
tokenizer directory its tokenizer files are copied beside the weights; a sentencepiece `.model` is copied as is; the
tokenizer of a `.gguf` model file (models.gguf) is written as transformers' tokenizer files (tokenizer.json, its
config, the chat template), not the whole model file.
A LoRA run's model is written with its adapters merged into the weights (W + (alpha / rank) A B, models.lora.merged);
with --lora_adapters the adapters are also written apart, in peft's layout, under DIR/adapter.

The checkpoint is written into a temporary directory beside DIR and renamed into place when complete. A DIR that
exists and is not empty is refused unless --overwrite is given; it is then replaced whole, never mixed with the new
files.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile
from typing import Sequence

from absl import flags

from genenv_jax import cli

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
  """Copies the tokenizer files of `source` (an HF directory or a sentencepiece file) into `out`; a `.gguf` model
  file's tokenizer is saved as transformers' files (`save_pretrained` of models.gguf.hf_tokenizer, the tokenizer the
  run used), so that an export is not the ~100 MB model file again. Returns the names written."""
  from genenv_jax.models import gguf  # pylint: disable=import-outside-toplevel

  if source.is_file() and gguf.is_gguf(source):
    before = set(os.listdir(out))
    gguf.hf_tokenizer(gguf.read(source)).save_pretrained(out)
    return sorted(set(os.listdir(out)) - before)
  if source.is_file():
    shutil.copy2(source, out / source.name)
    return [source.name]
  copied = [name for name in TOKENIZER_FILES if (source / name).is_file()]
  for name in copied:
    shutil.copy2(source / name, out / name)
  return copied


def _define_flags(flag_values: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags: on absl's FLAGS when run as a program, on a fresh FlagValues in cli.call (see cli)."""
  global _FLAGS
  _FLAGS = (
    flags.DEFINE_string(
      "workdir", None, "A training run's workdir (summary.json + checkpoints/).", flag_values=flag_values
    ),
    flags.DEFINE_string("out", None, "The HF checkpoint directory to write.", flag_values=flag_values),
    flags.DEFINE_enum(
      "role", "agent", ["agent", "env"], "Which of the run's two models to export.", flag_values=flag_values
    ),
    flags.DEFINE_boolean("overwrite", False, "Replace --out when it exists and is not empty.", flag_values=flag_values),
    flags.DEFINE_boolean(
      "lora_adapters",
      False,
      "A LoRA run: also write the adapters apart (peft's adapter_model.safetensors + adapter_config.json) under "
      "OUT/adapter, beside the merged weights.",
      flag_values=flag_values,
    ),
  )
  flags.mark_flags_as_required(["workdir", "out"], flag_values=flag_values)


def main(argv: Sequence[str]) -> None:
  """Exports the model; a bad --workdir or --out is a user error (cli: one `error:` line, exit status 2)."""
  cli.no_arguments(argv)
  args = cli.namespace(_FLAGS)
  from genenv_jax.evaluation.agents import load_workdir  # pylint: disable=import-outside-toplevel
  from genenv_jax.models import lora  # pylint: disable=import-outside-toplevel
  from genenv_jax.models.hf import save_hf  # pylint: disable=import-outside-toplevel

  out = pathlib.Path(args.out).expanduser()
  if out.exists() and not out.is_dir():
    raise ValueError(f"--out {out} is a file; give a directory")
  if out.is_dir() and any(out.iterdir()) and not args.overwrite:
    raise ValueError(f"--out {out} is not empty; pass --overwrite to replace it, or choose a new directory")
  model, tokenizer, step = load_workdir(args.workdir, which=args.role)
  if args.lora_adapters and lora.spec_of(model) is None:
    raise ValueError(
      f"--lora_adapters: the {args.role} of {args.workdir} has no LoRA adapters ({args.role}.lora was off); "
      "export without --lora_adapters"
    )
  out.parent.mkdir(parents=True, exist_ok=True)
  staging = pathlib.Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}.export-"))
  try:
    save_hf(lora.merged(model), staging)  # a model without adapters is written as it is
    if args.lora_adapters:
      lora.save_adapters(model, staging / "adapter")
    copied = copy_tokenizer(pathlib.Path(tokenizer.path), staging)
    replace_directory(staging, out)
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
  print(f"wrote the {args.role} at step {step} to {out} (tokenizer files: {', '.join(copied) or 'none'})")


def replace_directory(new: pathlib.Path, target: pathlib.Path) -> None:
  """Puts the complete directory `new` at `target`: renamed into place, the old `target` (if any) moved aside first
  and deleted only once the new one is in place, so an interrupted export never leaves a mix of two checkpoints."""
  old = None
  if target.exists():
    old = target.with_name(f".{target.name}.old-{os.getpid()}")
    os.replace(target, old)
  os.replace(new, target)
  if old is not None:
    shutil.rmtree(old, ignore_errors=True)


if __name__ == "__main__":
  _define_flags()
  cli.run(main, "genenv_jax.export")
