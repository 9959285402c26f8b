"""Prompts for BFCL items, in two styles.

* "bfcl" (default): BFCL's default prompting, `bfcl_eval/constants/default_prompts.py` and
  `model_handler/utils.py` (system_prompt_pre_processing_chat_model): one system message holding the instruction to
  answer with `[func(param=value), ...]` and the function docs as JSON; a system message that the question brings is
  appended to it after a blank line.
* "toolrl": the prompt of ToolRL's BFCL handler (qiancheng0/ToolRL `benchmarks/BFCL/rlla_qwen.py`), which the
  protocol GenEnv follows: the ToolRL system prompt (tools listed as `N. Name / Description / Parameters`, output in
  a `<tool_call>` block of JSON lines, the same prompt as the API-Bank items) and one user message holding the
  dialogue as `**Dialogue Records History**` with `<user> ... </user>` turns, each followed by ToolRL's instruction
  to call tools or say why not.

Both styles first apply BFCL's language hints to the docs (`language_docs`): each description gains "Note that the
provided function is in <Python 3 | Java 8 SDK | JavaScript> syntax."; Java/JavaScript parameters become strings
whose descriptions name their Java/JavaScript type (and, for arrays and dicts, their element schema).
"""

from __future__ import annotations

import copy
import json
from typing import Any, Mapping, Sequence

from genenv_jax.benchmarks.parsing.tool_calls import ToolCall, format_json_tool_calls, format_python_calls
from genenv_jax.tasks.benchmark import Message

STYLES = ("bfcl", "toolrl")

BFCL_SYSTEM_PROMPT = (
  "You are an expert in composing functions. You are given a question and a set of possible functions. Based on "
  "the question, you will need to make one or more function/tool calls to achieve the purpose.\n"
  "If none of the functions can be used, point it out. If the given question lacks the parameters required by "
  "the function, also point it out.\n"
  "You should only return the function calls in your response.\n\n"
  "If you decide to invoke any of the function(s), you MUST put it in the format of [func_name1(params_name1="
  "params_value1, params_name2=params_value2...), func_name2(params)]\n"
  "You SHOULD NOT include any other text in the response.\n\n"
  "At each turn, you should try your best to complete the tasks requested by the user within the current turn. "
  "Continue to output functions to call until you have fulfilled the user's request to the best of your ability. "
  "Once you have no more functions to call, the system will consider the current turn complete and proceed to "
  "the next turn or task.\n\n"
  "Here is a list of functions in JSON format that you can invoke.\n{functions}\n"
)

TOOLRL_SYSTEM_PROMPT = (
  "You are a helpful multi-turn dialogue assistant capable of leveraging tool calls to solve user tasks and "
  "provide structured chat responses.\n\n"
  "**Available Tools**\nIn your response, you can use the following tools:\n{tools}\n\n"
  "**Steps for Each Turn**\n"
  "1. **Think:** Recall relevant context and analyze the current user goal.\n"
  "2. **Decide on Tool Usage:** If a tool is needed, specify the tool and its parameters.\n"
  "3. **Respond Appropriately:** If a response is needed, generate one while maintaining consistency across user "
  "queries.\n\n"
  "**Output Format**\n```plaintext\n<think> Your thoughts and reasoning </think>\n<tool_call>\n"
  '{{"name": "Tool name", "parameters": {{"Parameter name": "Parameter content", "... ...": "... ..."}}}}\n'
  '{{"name": "... ...", "parameters": {{"... ...": "... ...", "... ...": "... ..."}}}}\n'
  "...\n</tool_call>\n<response> AI's final response </response>\n```\n\n"
  "**Important Notes**\n"
  "1. You must always include the `<think>` field to outline your reasoning. Provide at least one of "
  "`<tool_call>` or `<response>`. Decide whether to use `<tool_call>` (possibly multiple times), `<response>`, or "
  "both.\n"
  "2. You can invoke multiple tool calls simultaneously in the `<tool_call>` fields. Each tool call should be a "
  'JSON object with a "name" field and an "parameters" field containing a dictionary of parameters. If no '
  'parameters are needed, leave the "parameters" field an empty dictionary.\n'
  "3. Refer to the previous dialogue records in the history, including the user's queries, previous "
  "`<tool_call>`, `<response>`, and any tool feedback noted as `<obs>` (if exists).\n"
)

TOOLRL_SINGLE_TURN_SUFFIX = (
  "If there's no appropriate tools to apply or required parameters are missing, please directly inform me in "
  "your response without any tool call, or call the tool with the name as 'None'. Otherwise, you should use one "
  "or more necessary tool calls to complete the given task in this turn."
)
TOOLRL_MULTI_TURN_SUFFIX = (
  "Use the one or more necessary tool calls to complete the task. You could perform tool calls for multiple "
  "rounds so you can try and error. Please make a comprehensive plan about how to achieve the goal step by step, "
  "and begin to call the tool step by step. If no tools apply or required parameters are missing, please also "
  "directly state this in your response without tool calls."
)

_HINTS = {
  "python": " Note that the provided function is in Python 3 syntax.",
  "java": " Note that the provided function is in Java 8 SDK syntax.",
  "javascript": " Note that the provided function is in JavaScript syntax.",
}


def language_docs(functions: Sequence[Mapping[str, Any]], language: str) -> list[dict[str, Any]]:
  """Copies of the function docs with BFCL's language hints (see the module docstring)."""
  if language not in _HINTS:
    raise ValueError(f"unknown BFCL language {language!r}; expected one of {tuple(_HINTS)}")
  docs = copy.deepcopy([dict(f) for f in functions])
  noun = {"java": "Java", "javascript": "JavaScript"}.get(language)
  for doc in docs:
    doc["description"] = doc.get("description", "") + _HINTS[language]
    if noun is None:
      continue
    for prop in doc.get("parameters", {}).get("properties", {}).values():
      kind = prop.get("type")
      if kind == "any":
        prop["description"] = prop.get("description", "") + (
          f" This parameter can be of any type of {noun} object in string representation."
        )
      else:
        prop["description"] = prop.get("description", "") + (
          f" This is {noun} {kind} type parameter in string representation."
        )
      if kind in ("Array", "ArrayList", "array") and isinstance(prop.get("items"), dict):
        prop["description"] += (
          f" The list elements are of type {prop['items'].get('type')}; they are not in string representation."
        )
        del prop["items"]
      if language == "javascript" and kind == "dict" and "properties" in prop:
        prop["description"] += (
          " The dictionary entries have the following schema; they are not in string "
          f"representation. {json.dumps(prop['properties'])}"
        )
        del prop["properties"]
      prop["type"] = "string"
  return docs


def render_calls(calls: Sequence[ToolCall], style: str) -> str:
  """An assistant turn that makes `calls`, in the style's output syntax ("[]" / an empty block for no call)."""
  return format_python_calls(calls) if style == "bfcl" else format_json_tool_calls(calls)


def _toolrl_tools(docs: Sequence[Mapping[str, Any]]) -> str:
  return "\n".join(
    f"{i}. Name: {d['name']}\nDescription: {d.get('description', '')}\n"
    f"Parameters: {json.dumps(d.get('parameters', {}).get('properties', {}))}"
    for i, d in enumerate(docs, 1)
  )


def build_messages(
  dialogue: Sequence[Message],
  functions: Sequence[Mapping[str, Any]],
  language: str,
  style: str = "bfcl",
  multi_turn: bool = False,
) -> tuple[Message, ...]:
  """The prompt for a dialogue (user/assistant/system messages, the last one the user's) in the given style."""
  if style not in STYLES:
    raise ValueError(f"unknown prompt style {style!r}; expected one of {STYLES}")
  docs = language_docs(functions, language)
  if style == "bfcl":
    system = BFCL_SYSTEM_PROMPT.format(functions=json.dumps(docs, indent=4))
    rest = list(dialogue)
    if rest and rest[0].get("role") == "system":
      system = system + "\n\n" + rest.pop(0)["content"]
    return ({"role": "system", "content": system}, *({"role": m["role"], "content": m["content"]} for m in rest))
  suffix = TOOLRL_MULTI_TURN_SUFFIX if multi_turn else TOOLRL_SINGLE_TURN_SUFFIX
  user = "**Dialogue Records History**\n"
  for message in dialogue:
    if message.get("role") == "user":
      user += f"<user> {message['content'].strip()}\n{suffix} </user>\n"
    elif message.get("role") == "assistant":
      user += f"\n{message['content'].strip()}\n"
  return (
    {"role": "system", "content": TOOLRL_SYSTEM_PROMPT.format(tools=_toolrl_tools(docs))},
    {"role": "user", "content": user.strip()},
  )
