"""Java and JavaScript call text as BFCL's official decoder reads it (the source parser of `bfcl.official`).

bfcl-eval 2026.3.23 parses a Java/JavaScript answer with tree-sitter (`model_handler/parser/{java,js}_parser.py`) and
keeps, from the parse, one call: its name and its keyword arguments as text. This module parses with the same
tree-sitter grammars, at the versions bfcl-eval pins (tree-sitter 0.21.3, tree-sitter-java 0.21.0,
tree-sitter-javascript 0.21.4), so that error recovery accepts and rejects what upstream's does, and re-implements the
walk over the parse. Facts re-implemented, no code copied:

A parse is a syntax error when its S-expression names an ERROR node (recovered parses with only MISSING nodes pass,
so `f(, a='x')` reads as `f(a='x')`), and here also when the tree nests deeper than MAX_DEPTH levels, near where
upstream's recursive walk and S-expression writer crash (no model answer nests so deep).

Java (`parse_java`): the first method invocation in a pre-order walk of the tree is the call, named `object.name`
(or `name`). Its arguments `k=v` (any assignment operator) give `{k: value}`; a bare identifier or class literal gives
the key None; a repeated key is an error. Other arguments are dropped. A value is rendered as upstream's node walk
does: a string or char literal loses its quotes (kept when nested); an identifier, type identifier, class literal or
method invocation keeps its text; `new T[]{...}` renders as `new T[]` and its initializer (no initializer: an error);
`new T<...>(args)` as its type and rendered arguments, its class body dropped (so a HashMap's `{{ put(...); }}` block
is lost); any other node as its children's renderings joined without spaces. Upstream cuts node text from the decoded
string at byte offsets, which shifts the text after a non-ASCII character; that is reproduced. No call at all decodes
to `{}` (not a call list).

JavaScript (`parse_js`): the first top-level expression statement that is a call is the call (None when there is
none, e.g. a list of two calls, which is one sequence expression), named by its first child's text; its second child
holds the arguments. Arguments `k=v` give `{k: text of v}`, with one pair of matching outer quotes removed; a bare
identifier or `true` gives the key None; a repeated key is an error; other arguments are dropped.
"""

from __future__ import annotations

import functools
from typing import Any

import tree_sitter
import tree_sitter_java
import tree_sitter_javascript

MAX_SOURCE = 100_000  # longer answers are not call text; they decode as a syntax error
# Parse-tree levels; deeper is a syntax error. Upstream's recursive Java walk raises RecursionError near 490 levels and
# its S-expression writer crashes the process some ten thousand levels down; no model answer nests so deep.
MAX_DEPTH = 400
_GRAMMARS = {"java": tree_sitter_java, "javascript": tree_sitter_javascript}


class SourceSyntaxError(ValueError):
  """The text does not parse (upstream: a tree-sitter ERROR node, or a repeated argument name)."""


@functools.cache
def _parser(language: str) -> tree_sitter.Parser:
  parser = tree_sitter.Parser()
  parser.set_language(tree_sitter.Language(_GRAMMARS[language].language(), language))
  return parser


def _depth(root: tree_sitter.Node) -> int:
  """The number of levels of the tree under `root` (an iterative walk: the tree may be far deeper than the stack)."""
  cursor, depth, deepest = root.walk(), 0, 0
  while True:
    if cursor.goto_first_child():
      depth += 1
      deepest = max(deepest, depth)
      continue
    while not cursor.goto_next_sibling():
      if not cursor.goto_parent():
        return deepest
      depth -= 1


def parse_tree(text: str, language: str) -> tree_sitter.Node:
  """The root of `text`'s tree-sitter parse in `language` ("java" / "javascript"); SourceSyntaxError where the module
  docstring says the text does not parse."""
  if language not in _GRAMMARS:
    raise ValueError(f"no source grammar for {language!r}; choose from {sorted(_GRAMMARS)}")
  if len(text) > MAX_SOURCE:
    raise SourceSyntaxError(f"text of {len(text)} characters is over the {MAX_SOURCE} limit")
  try:
    data = text.encode("utf-8")
  except UnicodeEncodeError as e:
    raise SourceSyntaxError(f"text is not encodable as UTF-8: {e}") from None
  root = _parser(language).parse(data).root_node
  if _depth(root) > MAX_DEPTH:
    raise SourceSyntaxError(f"source nests deeper than {MAX_DEPTH} levels")
  if "ERROR" in root.sexp():
    raise SourceSyntaxError(f"{language} parse has an ERROR node")
  return root


def _add(arguments: dict[Any, Any], key: Any, value: Any) -> None:
  if key in arguments:
    raise SourceSyntaxError("Multiple arguments with the same name are not supported")
  arguments[key] = value


# ------------------------------------------------------------------------------------------------ Java


def _java_render(node: tree_sitter.Node, text: str, nested: bool) -> str:
  """A Java value as upstream's node walk renders it (module docstring); `text[start_byte:end_byte]` on purpose."""
  kind = node.type
  if kind in ("string_literal", "character_literal"):
    raw = text[node.start_byte : node.end_byte]
    return raw if nested else raw[1:-1]
  if kind in ("identifier", "class_literal", "type_identifier", "method_invocation") or not node.child_count:
    return text[node.start_byte : node.end_byte]
  if kind == "array_creation_expression":
    value = node.child_by_field_name("value")
    if value is None:
      raise SourceSyntaxError("array creation without an initializer has no value upstream")
    return f"new {_java_render(node.child_by_field_name('type'), text, True)}[]{_java_render(value, text, True)}"
  if kind == "object_creation_expression":
    arguments = node.child_by_field_name("arguments")
    rendered = [
      _java_render(c, text, True) for c in (arguments.children if arguments else []) if c.type not in (",", "(", ")")
    ]
    return f"new {_java_render(node.child_by_field_name('type'), text, True)}({', '.join(rendered)})"
  parts = []
  for child in node.children:  # a loop, not a generator: one stack frame per tree level
    parts.append(_java_render(child, text, True))
  return "".join(parts)


def _first_invocation(node: tree_sitter.Node) -> tree_sitter.Node | None:
  """The first method invocation in pre-order; upstream stops at one (it does not look inside it)."""
  if node.type == "method_invocation":
    return node if node.child_by_field_name("arguments") is not None else None
  for child in node.children:
    found = _first_invocation(child)
    if found is not None:
      return found
  return None


def parse_java(text: str) -> list[dict[str, dict[Any, Any]]] | dict:
  """The call of Java source text by the module's rules: `[{name: {key: value text}}]`, or {} for no call."""
  call = _first_invocation(parse_tree(text, "java"))
  if call is None:
    return {}
  name_node, owner = call.child_by_field_name("name"), call.child_by_field_name("object")
  name = text[name_node.start_byte : name_node.end_byte]
  if owner is not None:
    name = text[owner.start_byte : owner.end_byte] + "." + name
  arguments: dict[Any, Any] = {}
  for arg in call.child_by_field_name("arguments").children:
    if arg.type == "assignment_expression":
      left = arg.children[0]
      _add(arguments, text[left.start_byte : left.end_byte], _java_render(arg.children[2], text, False))
    elif arg.type in ("identifier", "class_literal"):
      _add(arguments, None, _java_render(arg, text, False))
  return [{name: arguments}]


# ------------------------------------------------------------------------------------------------ JavaScript


def _js_text(node: tree_sitter.Node) -> str:
  return node.text.decode("utf-8")


def parse_js(text: str) -> list[dict[str, dict[Any, Any]]] | None:
  """The call of JavaScript source text by the module's rules: `[{name: {key: value text}}]`, or None."""
  root = parse_tree(text, "javascript")
  for statement in root.children:
    if statement.type != "expression_statement":
      continue
    for call in statement.children:
      if call.type != "call_expression":
        continue
      if call.child_count < 2:
        raise SourceSyntaxError("a call without arguments node")
      arguments: dict[Any, Any] = {}
      for arg in call.children[1].children:
        if arg.type == "assignment_expression":
          value = _js_text(arg.children[2])
          if value[:1] in ("'", '"') and value.endswith(value[0]):
            value = value[1:-1]
          _add(arguments, _js_text(arg.children[0]), value)
        elif arg.type in ("identifier", "true"):
          _add(arguments, None, _js_text(arg))
      return [{_js_text(call.children[0]): arguments}]
  return None
