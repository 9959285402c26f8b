"""The ALFWorld agent's text protocol: the ReAct-style prompt it reads and the action parsed from its reply.

The same prompt serves the step-level benchmark items and the episodic loop, so a model is asked the same way in both.
One user turn holds, in order: the task; the room description of the first observation; the history of earlier
(action, observation) pairs as `> action` lines each followed by the observation text (with `history_window`, only
the last that many pairs, and the header says "(last k of M steps)"); the current observation; the admissible
commands, one per line after `- `; and the reply format "Thought: ..." then "Action: ...", as in ReAct (Yao et al.,
2023, whose ALFWorld prompts use `> action` lines too).

Action extraction (`extract_action`), in order of precedence:
1. the first line of the form `Action: <text>` (case-insensitive; markdown `**Action:**` too). The first, not the
   last: a model that runs on and invents later turns meant its first action for this turn;
2. otherwise the first line that starts with `> `;
3. otherwise the first non-empty line.
`normalize_action` then lower-cases, collapses whitespace and strips surrounding quotes, backticks, asterisks and a
final full stop; ALFWorld commands are all lower case. Malformed or empty output yields "" (never raises).
"""

from __future__ import annotations

import re
from typing import Sequence

from genenv_jax.tasks.benchmark import Message

SYSTEM_PROMPT = (
  "You are an agent in a household, played as a text game (ALFWorld). Each turn you see your task, what has "
  "happened so far, the current observation and the list of admissible actions. Think briefly, then choose exactly "
  "one admissible action, copied exactly as listed. Reply in two lines:\n"
  "Thought: <your reasoning>\n"
  "Action: <one admissible action>"
)
REPLY_INSTRUCTION = 'Reply with "Thought: ..." and then "Action: <one admissible action>".'
_ACTION_LINE = re.compile(
  r"^[ \t*_#>-]*action[ \t]*[*_]*[ \t]*[:：][ \t]*[*_]*[ \t]*(.*?)[ \t]*$", re.IGNORECASE | re.MULTILINE
)
_PROMPT_LINE = re.compile(r"^[ \t]*>[ \t]*(.*?)[ \t]*$", re.MULTILINE)
_HISTORY_HEADER = "History (each `> action` is followed by what you observed), oldest first"
_HISTORY_END = "\nCurrent observation:\n"
_STRIP_CHARS = "\"'`*_ \t"
_WINDOW_NOTE = re.compile(r"\(last \d+ of (\d+) steps\):")
_TASK_AND_ROOM = re.compile(
  r"\AYour task is to: (.*?)\n\nObservation at the start:\n(.*?)\n\n(?:History|Current)", re.DOTALL
)


def normalize_action(text: str) -> str:
  """Lower case, single spaces, no surrounding quotes/backticks/asterisks and no final full stop."""
  if not isinstance(text, str):
    return ""
  action = " ".join(text.split()).strip(_STRIP_CHARS)
  while action.endswith("."):
    action = action[:-1].rstrip(_STRIP_CHARS)
  return action.lower()


def extract_action(output: object) -> str:
  """The normalised action of a model reply by the module's rules (`Action:` line > `> ` line > first line), or ""."""
  if not isinstance(output, str) or not output.strip():
    return ""
  match = _ACTION_LINE.search(output)
  if match is not None and not match.group(1).strip(_STRIP_CHARS):
    rest = [line for line in output[match.end() :].splitlines() if line.strip()]
    return normalize_action(rest[0]) if rest else ""  # "Action:" alone on its line: the action is the next line
  if match is None:
    match = _PROMPT_LINE.search(output)
  if match is not None:
    return normalize_action(match.group(1))
  first = next(line for line in output.splitlines() if line.strip())
  return normalize_action(first)


def format_user_prompt(
  task: str,
  room: str,
  history: Sequence[tuple[str, str]],
  observation: str,
  admissible: Sequence[str],
  history_window: int | None = None,
) -> str:
  """The user turn described in the module docstring; `history_window` keeps only the last that many pairs."""
  if history_window is not None and history_window < 0:
    raise ValueError(f"history_window must be >= 0 or None, got {history_window}")
  shown = list(history) if history_window is None else list(history)[max(len(history) - history_window, 0) :]
  parts = [f"Your task is to: {task}", f"Observation at the start:\n{room}"]
  if history:
    header = _HISTORY_HEADER
    if len(shown) < len(history):
      header += f" (last {len(shown)} of {len(history)} steps)"
    parts.append(header + ":" + "".join(f"\n> {action}\n{obs}" for action, obs in shown))
  commands = "\n".join(f"- {c}" for c in admissible) if admissible else "(none)"
  parts.append(f"Current observation:\n{observation}")
  parts.append(f"Admissible actions:\n{commands}")
  parts.append(REPLY_INSTRUCTION)
  return "\n\n".join(parts)


def build_messages(
  task: str,
  room: str,
  history: Sequence[tuple[str, str]],
  observation: str,
  admissible: Sequence[str],
  history_window: int | None = None,
) -> tuple[Message, ...]:
  """(system, user) chat messages for one decision."""
  user = format_user_prompt(task, room, history, observation, admissible, history_window)
  return ({"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user})


def _user_text(messages: Sequence[Message]) -> str:
  return next((str(m.get("content", "")) for m in reversed(messages) if m.get("role") == "user"), "")


def prompt_history_actions(messages: Sequence[Message]) -> list[str]:
  """The `> action` lines shown in the history section of a prompt built here (an oracle and test helper)."""
  user = _user_text(messages)
  start = user.find(_HISTORY_HEADER)
  if start < 0:
    return []
  end = user.find(_HISTORY_END, start)
  return _PROMPT_LINE.findall(user[start : end if end >= 0 else len(user)])


def prompt_step_index(messages: Sequence[Message]) -> int:
  """How many steps were taken before the prompt built here: M of "(last k of M steps)", else the shown pairs."""
  match = _WINDOW_NOTE.search(_user_text(messages))
  return int(match.group(1)) if match else len(prompt_history_actions(messages))


def prompt_task_and_room(messages: Sequence[Message]) -> tuple[str, str]:
  """(task, room description) of a prompt built here; ("", "") when it is not one."""
  match = _TASK_AND_ROOM.search(_user_text(messages))
  return (match.group(1).strip(), match.group(2).strip()) if match else ("", "")


def oracle_reply(action: str) -> str:
  """A well-formed reply that takes `action`."""
  return f"Thought: The expert plan says to do this next.\nAction: {action}"
