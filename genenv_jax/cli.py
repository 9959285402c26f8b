"""What the absl commands (main, plan, sweep, compare) share: a user error is one `error:` line and exit status 2.

A user error is a bad flag or override (unknown flag, unknown `--config.key`, a value of the wrong type, a config file
that does not load) or a bad input the command reports as ValueError / FileNotFoundError (missing data, an invalid
config, a missing file). Any other OSError (a full disk, a lost mount) is one `error:` line with exit status 1.
absl alone exits 1 after a 40-line traceback for an unknown `--config.key`; here the user sees what was wrong and what
to do. `--verbosity=1` (absl's own flag) asks for the traceback instead.
"""

from __future__ import annotations

import sys
from typing import Callable, Sequence

from absl import app, flags

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


def run(main: Callable[[list[str]], None], prog: str) -> None:
  """app.run(main) with user errors reported as `PROG: error: ...` and exit status 2 (see the module docstring)."""
  verbose = wants_traceback(sys.argv[1:])

  def parse(argv: list[str]) -> list[str]:
    try:
      return flags.FLAGS(argv)
    except flags.Error as e:
      if verbose:
        raise
      _fail(prog, e, "\nPass --help to see the flags.")
    except (AttributeError, KeyError, TypeError, OSError) as e:  # ml_collections: an unknown key, a file not loading
      if verbose:
        raise
      _fail(prog, f"no config key {message_of(e)!r} (a --config.KEY override names a key the config lacks)")
    return []

  def guarded(argv: list[str]) -> None:
    try:
      main(argv)
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

  app.run(guarded, flags_parser=parse)
