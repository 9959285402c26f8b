"""What the commands share: absl flags, and a user error as one `error:` line with exit status 2.

Each command (main, plan, sweep, compare, evaluate, export, data, the bench.* benchmarks and the scripts.* tools)
defines its flags in a `_define_flags(flag_values)` function, called on absl's FLAGS only when it runs as a program,
then runs through `run(main, prog)`. Flag names are spelled with underscores (`--data_dir`, `--fast_compile`: absl's
convention, and the `--config.key` overrides'; tests/unit/test_cli_errors.py and tests/unit/scripts/test_script_flags.py
check that no command defines a dashed name), and a name means the same thing in every command that has it. evaluate,
export, data, the bench.* and the scripts.* commands also run in this process through `call(module, argv)`, which
defines their flags on a fresh `FlagValues` instead of absl's global one: commands with flags of the same name
(`--workdir`) then run one after another in one process (tests, notebooks) without a DuplicateFlagError. main, plan,
sweep and compare run as programs only. A command that hands arguments on to another (scripts.kill_resume:
`--config.KEY=VALUE` to genenv_jax.main) names their prefixes in `_PASS_THROUGH`: those arguments skip its own parsing
and reach its main after the positional ones.

A user error is a bad flag or override (unknown flag, unknown `--config.key`, a value of the wrong type, a config file
that does not load) or a bad input the command reports as ValueError / FileNotFoundError (missing data, an invalid
config, a missing file). Any other OSError (a full disk, a lost mount) is one `error:` line with exit status 1.
absl alone exits 1 after a 40-line traceback for an unknown `--config.key`; here the user sees what was wrong and what
to do. `--verbosity=1` (absl's own flag) asks for the traceback instead.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import sys
import types
from typing import Callable, Iterable, Sequence

from absl import app, flags

from genenv_jax.parallel.quiet_start import quiet_start

USER_ERRORS = (ValueError, FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


def wants_traceback(argv: Sequence[str]) -> bool:
  """Whether argv raises absl's --verbosity (or -v) above 0, read before the flags are parsed."""
  for i, arg in enumerate(argv):
    for name in ("--verbosity", "-v"):
      value = None
      if arg.startswith(name + "="):
        value = arg.split("=", 1)[1]
      elif arg == name and i + 1 < len(argv):
        value = argv[i + 1]
      if value is not None:
        try:
          return int(value) > 0
        except ValueError:
          return False
  return False


def message_of(error: BaseException) -> str:
  """The error's text for one line: a KeyError's quotes dropped; a config file that failed to load (ml_collections
  reports it lazily, with the paths it tried) reduced to the reason."""
  text = str(error).strip()
  if isinstance(error, (KeyError, AttributeError)) and len(text) > 1 and text[0] == text[-1] and text[0] in "\"'":
    text = text[1:-1].strip("\"'")
  if "Traceback (most recent call last)" in text:  # ml_collections embeds the config file's traceback in its error
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    text = f"{lines[0].removesuffix(':')}: {lines[-1]}"
  if "Failed loading config file" in text:
    reasons = [line.strip() for line in text.splitlines() if line.strip().startswith("[Errno")]
    text = "the --config file did not load: " + (reasons[-1] if reasons else " ".join(text.split()))
  return text or type(error).__name__


def _fail(prog: str, error: BaseException | str, hint: str = "", status: int = 2) -> None:
  text = error if isinstance(error, str) else message_of(error)
  print(f"{prog}: error: {text}{hint}", file=sys.stderr, flush=True)
  sys.exit(status)


def _parse(
  flag_values: flags.FlagValues, argv: list[str], prog: str, verbose: bool, pass_through: tuple[str, ...] = ()
) -> list[str]:
  """Parses argv (argv[0] is the program) into flag_values; returns the program and its positional arguments, then the
  arguments that start with one of `pass_through`'s prefixes (left unparsed)."""
  passed = [a for a in argv[1:] if pass_through and a.startswith(pass_through)]
  try:
    return [*flag_values([a for a in argv if a not in passed]), *passed]
  except flags.Error as e:
    if verbose:
      raise
    _fail(prog, e, "\nPass --help to see the flags.")
  except (AttributeError, KeyError, TypeError, OSError) as e:  # ml_collections: an unknown key, a file not loading
    if verbose:
      raise
    _fail(prog, f"no config key {message_of(e)!r} (a --config.KEY override names a key the config lacks)")
  return []


def _guarded(main: Callable[[list[str]], int | None], prog: str, verbose: bool) -> Callable[[list[str]], int | None]:
  """main, with its user errors reported as one `error:` line and exit status 2 (other OSErrors: status 1)."""

  def guarded(argv: list[str]) -> int | None:
    try:
      return main(argv)
    except app.UsageError:
      raise
    except USER_ERRORS as e:
      if verbose:
        raise
      _fail(prog, e)
    except OSError as e:  # the config file failed to load (reported when first read), or the disk failed
      if verbose:
        raise
      _fail(prog, e, status=2 if "Failed loading config file" in str(e) else 1)

  return guarded


def run(main: Callable[[list[str]], int | None], prog: str, pass_through: tuple[str, ...] = ()) -> None:
  """app.run(main) with user errors reported as `PROG: error: ...` and exit status 2 (see the module docstring);
  arguments starting with a `pass_through` prefix reach main unparsed."""
  verbose = wants_traceback(sys.argv[1:])
  quiet_start()  # no libtpu lines on a host without TPU chips (parallel.quiet_start)

  def parse(argv: list[str]) -> list[str]:
    return _parse(flags.FLAGS, argv, prog, verbose, pass_through)

  app.run(_guarded(main, prog, verbose), flags_parser=parse)


def call(module: types.ModuleType, argv: Sequence[str]) -> int:
  """Runs the command `module` (e.g. genenv_jax.evaluate) in this process, as `python -m MODULE ARGV...` would, and
  returns its exit status; the one-line errors go to stderr as they would. Its flags (`module._define_flags`) are
  defined on a fresh FlagValues, absl's global FLAGS untouched, beside `--verbosity` (a traceback instead of the
  one-line error: the exception propagates). absl's other own flags (--help, --flagfile) are not there. Arguments that
  start with one of `module._PASS_THROUGH`'s prefixes (if it has one) reach its main unparsed, as in `run`."""
  argv = [str(a) for a in argv]
  prog = module.__name__.removesuffix(".__main__")  # genenv_jax.data.__main__ runs as `python -m genenv_jax.data`
  verbose = wants_traceback(argv)
  flag_values = flags.FlagValues()
  help_text = "1 or more: a traceback instead of a one-line error"
  flags.DEFINE_integer("verbosity", 0, help_text, short_name="v", flag_values=flag_values)
  module._define_flags(flag_values)  # pylint: disable=protected-access
  try:
    pass_through = getattr(module, "_PASS_THROUGH", ())
    status = _guarded(module.main, prog, verbose)(_parse(flag_values, [prog, *argv], prog, verbose, pass_through))
  except SystemExit as e:
    status = e.code
  if isinstance(status, str):  # sys.exit("message"), as Python reports it
    print(status, file=sys.stderr, flush=True)
  return status if isinstance(status, int) else int(status is not None)


def no_arguments(argv: Sequence[str]) -> None:
  """A command that takes only flags: a positional argument is a user error (exit status 2) naming it."""
  if len(argv) > 1:
    raise ValueError(f"unexpected arguments {list(argv[1:])}: every input is a --flag (see --help)")


def namespace(holders: Iterable[flags.FlagHolder]) -> types.SimpleNamespace:
  """The parsed values of `holders` as one object, an attribute per flag (--data_dir: .data_dir)."""
  return types.SimpleNamespace(**{h.name: h.value for h in holders})


def integers(name: str, values: Sequence[str]) -> tuple[int, ...]:
  """A comma-separated list flag's values as integers (empty items dropped); ValueError naming --name otherwise."""
  try:
    return tuple(int(v) for v in values if v.strip())
  except ValueError:
    raise ValueError(f"--{name} takes integers separated by commas, got {','.join(values)!r}") from None


def config_module(path: str) -> types.ModuleType:
  """The config file at `path` (a module with get_config(variant)), loaded from its path, as ml_collections'
  --config flag loads it; FileNotFoundError naming the path when there is none."""
  spec = importlib.util.spec_from_file_location("genenv_jax_config_file", path)
  if spec is None or not os.path.isfile(path):
    raise FileNotFoundError(f"the config file {path!r} does not exist")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


def override(config, assignment: str) -> None:
  """`key.sub=value` on an ml_collections config, as `--config.key.sub=value` would set it: the value is read as a
  Python literal where it is one (2e-4, (0.25, 0.5, 0.25), True), else kept as text, then cast to the setting's type."""
  key, sep, text = assignment.partition("=")
  if not sep:
    raise ValueError(f"--set {assignment!r}: expected key=value, e.g. --set=agent.optimizer.lr=2e-4")
  try:
    value = ast.literal_eval(text)
  except (ValueError, SyntaxError):
    value = text
  *path, last = key.split(".")
  node = config
  for part in path:
    if part not in node:
      raise ValueError(f"--set {assignment!r}: the config has no section {part!r}")
    node = node[part]
  if last not in node:
    raise ValueError(f"--set {assignment!r}: the config has no setting {key!r}")
  old = node[last]
  if isinstance(old, (bool, int, float, tuple)) and not isinstance(value, str):
    value = type(old)(value)
  with config.unlocked():
    node[last] = value
