"""Java and JavaScript call text as BFCL's official decoder reads it (the `bfcl_official` mode's source parser).

bfcl-eval 2026.3.23 parses a Java/JavaScript answer with tree-sitter (`model_handler/parser/{java,js}_parser.py`) and
keeps, from the parse, one call: its name and its keyword arguments as text. This module re-implements those rules
with its own linear-time tokenizer and recursive-descent parser over the part of each grammar that model outputs use
(literals, names, member access, calls, `new`, array/object literals, unary/binary/ternary operators, casts,
assignments, statements separated by `;`, and in JavaScript by line breaks). Text outside that part is a syntax
error, as a tree-sitter parse with an ERROR node is upstream. Facts re-implemented, no code copied:

Java (`parse_java`): the text must parse as statements; the first method invocation in source order (the outermost
when nested) is the call, named `object.name` with the object's source text. Its arguments `k=v` give `{k: value}`;
a bare identifier argument gives the key None (a second one, or a repeated name, is an error); other positional
arguments are dropped. A value is rendered as upstream's node walk does: a string or char literal loses its quotes;
a method invocation keeps its source text; `new T[]{...}` renders as `new T[]` and its initializer, `new T<...>(args)`
as `new T<...>(args)` with its class body dropped (so a HashMap's `{{ put(...); }}` block is lost); any other
expression as its tokens joined without spaces (nested string literals keep their quotes). No call at all decodes
to `{}` (not a call list).

JavaScript (`parse_js`): the text must parse as statements; the first expression statement that is a call is the
call (None when there is none, e.g. a list of two calls, which is one sequence expression), named by its callee's
source text. Arguments `k=v` give `{k: source text of v}`, with one pair of matching outer quotes removed; a bare
identifier or `true` argument gives the key None (repeated: error); other positional arguments are dropped.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

MAX_SOURCE = 100_000  # longer answers are not call text; they decode as a syntax error
# Brackets, blocks and prefix operators nested deeper than this are a syntax error here (tree-sitter would parse them;
# no model answer nests so deep), which keeps the recursive parser and the tree walks far from Python's stack limit.
MAX_DEPTH = 50


class SourceSyntaxError(ValueError):
  """The text does not parse (upstream: a tree-sitter ERROR node, or a repeated argument name)."""


@dataclasses.dataclass(frozen=True)
class Token:
  kind: str  # "name", "number", "string", "char", "template", "regex", "op"
  text: str
  start: int
  end: int
  line_break_before: bool = False


_OPS = sorted(
  [
    "(",
    ")",
    "[",
    "]",
    "{",
    "}",
    ",",
    ";",
    ".",
    "?.",
    "...",
    "=",
    "==",
    "===",
    "!=",
    "!==",
    "<",
    ">",
    "<=",
    ">=",
    "+",
    "-",
    "*",
    "/",
    "%",
    "**",
    "++",
    "--",
    "!",
    "~",
    "&&",
    "||",
    "??",
    "&",
    "|",
    "^",
    "<<",
    ">>",
    ">>>",
    "+=",
    "-=",
    "*=",
    "/=",
    "%=",
    "&=",
    "|=",
    "^=",
    "<<=",
    ">>=",
    ">>>=",
    "**=",
    "?",
    ":",
    "=>",
    "::",
    "@",
  ],
  key=len,
  reverse=True,
)


def tokenize(text: str, language: str) -> list[Token]:
  """Tokens of Java/JavaScript source; SourceSyntaxError on an unterminated literal, a comment or a stray char."""
  tokens: list[Token] = []
  i, n, line_break = 0, len(text), False
  while i < n:
    ch = text[i]
    if ch in " \t\r\n\f":
      line_break = line_break or ch == "\n"
      i += 1
      continue
    start = i
    if ch.isalpha() or ch in "_$":
      while i < n and (text[i].isalnum() or text[i] in "_$"):
        i += 1
      kind = "name"
    elif ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
      i = _number_end(text, i)
      kind = "number"
    elif ch in "\"'`":
      quote, i = ch, i + 1
      while i < n and text[i] != quote:
        if text[i] == "\\":
          i += 1
        elif text[i] == "\n" and quote != "`":
          raise SourceSyntaxError("line break inside a string literal")
        i += 1
      if i >= n:
        raise SourceSyntaxError("unterminated string literal")
      i += 1
      kind = {"'": "char" if language == "java" else "string", '"': "string", "`": "template"}[ch]
      if kind == "template" and language == "java":
        raise SourceSyntaxError("backquote in Java")
    elif text.startswith("//", i) or text.startswith("/*", i):
      raise SourceSyntaxError("comments are not read")
    elif ch == "/" and language == "javascript" and _regex_allowed(tokens):
      i = _regex_end(text, i)
      kind = "regex"
    else:
      op = next((o for o in _OPS if text.startswith(o, i)), None)
      if op is None:
        raise SourceSyntaxError(f"unexpected character {ch!r}")
      i += len(op)
      kind = "op"
    tokens.append(Token(kind, text[start:i], start, i, line_break))
    line_break = False
  return tokens


def _number_end(text: str, i: int) -> int:
  """The end of the numeric literal at text[i]: hex/octal/binary, or digits[.digits][e[+-]digits], then a suffix."""
  n = len(text)
  if text.startswith(("0x", "0X", "0b", "0B", "0o", "0O"), i):
    i += 2
    while i < n and (text[i].isalnum() or text[i] == "_"):
      i += 1
    return i
  while i < n and (text[i].isdigit() or text[i] == "_"):
    i += 1
  if i < n and text[i] == "." and (i + 1 >= n or not text[i + 1].isalpha() or text[i + 1] in "eEfFdD"):
    i += 1
    while i < n and (text[i].isdigit() or text[i] == "_"):
      i += 1
  if (
    i < n
    and text[i] in "eE"
    and (i + 1 < n and (text[i + 1].isdigit() or (text[i + 1] in "+-" and i + 2 < n and text[i + 2].isdigit())))
  ):
    i += 2
    while i < n and text[i].isdigit():
      i += 1
  while i < n and text[i] in "lLfFdDn":
    i += 1
  return i


def _regex_allowed(tokens: list[Token]) -> bool:
  """A JavaScript `/` starts a regex literal where a value is expected (not after a value)."""
  if not tokens:
    return True
  last = tokens[-1]
  if last.kind in ("number", "string", "char", "template", "regex"):
    return False
  if last.kind == "name":
    return last.text in ("return", "typeof", "void", "delete", "in", "of", "new", "case", "instanceof")
  return last.text not in (")", "]", "}", "++", "--")


def _regex_end(text: str, i: int) -> int:
  """The end of the regex literal starting at text[i] == "/" (its flags included); SourceSyntaxError if unclosed."""
  j, in_class, n = i + 1, False, len(text)
  while j < n and (in_class or text[j] != "/"):
    if text[j] == "\n":
      raise SourceSyntaxError("line break inside a regex literal")
    if text[j] == "\\":
      j += 1
    elif text[j] == "[":
      in_class = True
    elif text[j] == "]":
      in_class = False
    j += 1
  if j >= n:
    raise SourceSyntaxError("unterminated regex literal")
  j += 1
  while j < n and "a" <= text[j] <= "z":
    j += 1
  return j


# ------------------------------------------------------------------------------------------------ expression trees


@dataclasses.dataclass
class Node:
  """A parsed expression: `kind` names the node type, `children` its sub-nodes and tokens in source order."""

  kind: str  # "call", "string", "char", "name", "array_new", "object_new", "assign", "other", "token"
  start: int
  end: int
  children: list[Any] = dataclasses.field(default_factory=list)
  callee: Any = None  # call: the callee node
  arguments: list[Any] = dataclasses.field(default_factory=list)  # call / object_new: argument nodes
  type_tokens: list[Token] = dataclasses.field(default_factory=list)  # array_new / object_new
  initializer: Any = None  # array_new
  token: Token | None = None  # token / string / char / name


_BINARY = {
  "||",
  "&&",
  "??",
  "|",
  "^",
  "&",
  "==",
  "!=",
  "===",
  "!==",
  "<",
  ">",
  "<=",
  ">=",
  "<<",
  ">>",
  ">>>",
  "+",
  "-",
  "*",
  "/",
  "%",
  "**",
  "instanceof",
  "in",
}
_ASSIGN = {"=", "+=", "-=", "*=", "/=", "%=", "&=", "|=", "^=", "<<=", ">>=", ">>>=", "**="}
_PREFIX = {"-", "+", "!", "~", "++", "--"}
_JS_PREFIX_WORDS = {"typeof", "void", "delete", "await"}
_JAVA_PRIMITIVES = {"int", "long", "short", "byte", "char", "float", "double", "boolean", "void"}


class _Parser:
  """Recursive descent over the token list; each method returns a Node or raises SourceSyntaxError."""

  def __init__(self, text: str, language: str):
    self.text, self.language = text, language
    self.tokens = tokenize(text, language)
    self.i = 0
    self.depth = 0

  # -- helpers
  def peek(self, k: int = 0) -> Token | None:
    j = self.i + k
    return self.tokens[j] if j < len(self.tokens) else None

  def at(self, text: str, k: int = 0) -> bool:
    tok = self.peek(k)
    return tok is not None and tok.kind in ("op", "name") and tok.text == text

  def take(self, text: str | None = None) -> Token:
    tok = self.peek()
    if tok is None or (text is not None and tok.text != text):
      raise SourceSyntaxError(f"expected {text or 'a token'} at {tok.start if tok else len(self.text)}")
    self.i += 1
    return tok

  def leaf(self, tok: Token, kind: str = "token") -> Node:
    return Node(kind, tok.start, tok.end, token=tok)

  def other(self, parts: list[Any]) -> Node:
    return Node("other", parts[0].start, parts[-1].end, children=parts)

  # -- statements
  def statements(self, closing: str | None = None) -> list[Node]:
    """Statements up to the end (or up to `closing`); a `{ ... }` statement is a block of statements."""
    out = []
    while self.peek() is not None and not (closing and self.at(closing)):
      if self.at(";"):
        self.take()
        continue
      if self.at("{"):
        open_tok = self.take()
        with self.nested():
          inner = self.statements("}")
        close = self.take("}")
        out.append(Node("block", open_tok.start, close.end, children=inner))
        continue
      out.append(self.expression())
      tok = self.peek()
      if tok is None or (closing and tok.text == closing):
        break
      if tok.text == ";":
        self.take()
      elif not (self.language == "javascript" and tok.line_break_before):
        raise SourceSyntaxError(f"unexpected {tok.text!r} at {tok.start}")
    return out

  # -- expressions
  @contextlib.contextmanager
  def nested(self):
    """One more level of nesting; SourceSyntaxError past MAX_DEPTH."""
    self.depth += 1
    if self.depth > MAX_DEPTH:
      raise SourceSyntaxError(f"nests deeper than {MAX_DEPTH} levels")
    try:
      yield
    finally:
      self.depth -= 1

  def expression(self) -> Node:
    return self.assignment()

  def assignment(self) -> Node:
    with self.nested():
      return self._assignment()

  def _assignment(self) -> Node:
    left = self.conditional()
    if self.peek() is not None and self.peek().kind == "op" and self.peek().text in _ASSIGN:
      op = self.take()
      right = self.assignment()
      return Node("assign", left.start, right.end, children=[left, self.leaf(op), right])
    if self.language == "javascript" and self.at("=>"):
      arrow = self.take()
      body = self.block() if self.at("{") else self.assignment()
      return self.other([left, self.leaf(arrow), body])
    return left

  def block(self) -> Node:
    """A `{ ... }` body, skipped by bracket matching (only JS arrow functions and functions use one)."""
    open_tok = self.take("{")
    depth, parts = 1, [self.leaf(open_tok)]
    while depth:
      tok = self.take()
      depth += {"{": 1, "}": -1}.get(tok.text, 0) if tok.kind == "op" else 0
      parts.append(self.leaf(tok))
    return self.other(parts)

  def conditional(self) -> Node:
    cond = self.binary()
    if not self.at("?"):
      return cond
    q = self.take()
    yes = self.expression()
    colon = self.take(":")
    no = self.assignment()
    return self.other([cond, self.leaf(q), yes, self.leaf(colon), no])

  def binary(self) -> Node:
    parts = [self.unary()]
    while self.peek() is not None and self.peek().text in _BINARY and self.peek().kind in ("op", "name"):
      parts += [self.leaf(self.take()), self.unary()]
    return parts[0] if len(parts) == 1 else self.other(parts)

  def unary(self) -> Node:
    tok = self.peek()
    if tok is not None and (
      (tok.kind == "op" and tok.text in _PREFIX)
      or (self.language == "javascript" and tok.kind == "name" and tok.text in _JS_PREFIX_WORDS)
    ):
      self.take()
      with self.nested():
        operand = self.unary()
      return self.other([self.leaf(tok), operand])
    if self.language == "java" and self.at("(") and self._cast_ahead():
      parts = [self.leaf(self.take("("))] + [self.leaf(t) for t in self._type_tokens()] + [self.leaf(self.take(")"))]
      with self.nested():
        return self.other(parts + [self.unary()])
    return self.postfix(self.primary())

  def _cast_ahead(self) -> bool:
    """`(Type) x` in Java: a primitive type, or a name type followed by a literal, a name or `(`."""
    tok, nxt = self.peek(1), self.peek(2)
    if tok is None or tok.kind != "name":
      return False
    if tok.text in _JAVA_PRIMITIVES:
      return True
    j = 2
    while (
      self.peek(j) is not None
      and self.peek(j).text in (".", "[", "]")
      or (self.peek(j) is not None and self.peek(j).kind == "name" and self.peek(j - 1).text == ".")
    ):
      j += 1
    nxt = self.peek(j)
    after = self.peek(j + 1)
    return (
      nxt is not None
      and nxt.text == ")"
      and after is not None
      and (after.kind in ("name", "number", "string", "char") or after.text == "(")
    )

  def _type_tokens(self) -> list[Token]:
    """A (possibly generic, dotted, array) type's tokens."""
    toks = [self.take()]
    if toks[0].kind != "name":
      raise SourceSyntaxError(f"expected a type at {toks[0].start}")
    while True:
      if self.at("."):
        toks += [self.take(), self.take()]
      elif self.at("<"):
        depth = 0
        while True:
          tok = self.take()
          toks.append(tok)
          if tok.text == "<":
            depth += 1
          elif tok.text in (">", ">>", ">>>"):
            depth -= len(tok.text)
            if depth <= 0:
              break
          elif not (tok.kind == "name" or tok.text in (",", ".", "?", "[", "]")):
            raise SourceSyntaxError(f"bad type argument {tok.text!r}")
      elif self.at("[") and self.at("]", 1):
        toks += [self.take(), self.take()]
      else:
        return toks

  def arguments(self) -> tuple[list[Node], list[Token]]:
    open_tok = self.take("(")
    args: list[Node] = []
    puncts = [open_tok]
    if not self.at(")"):
      while True:
        if self.language == "javascript" and self.at("..."):
          spread = self.take()
          args.append(self.other([self.leaf(spread), self.assignment()]))
        else:
          args.append(self.expression())
        if self.at(","):
          puncts.append(self.take())
          continue
        break
    puncts.append(self.take(")"))
    return args, puncts

  def postfix(self, node: Node) -> Node:
    while True:
      if self.at(".") or self.at("?."):
        dot = self.take()
        name = self.take()
        if name.kind != "name":
          raise SourceSyntaxError(f"expected a member name at {name.start}")
        if self.at("("):
          args, puncts = self.arguments()
          node = Node(
            "call",
            node.start,
            puncts[-1].end,
            callee=node,
            arguments=args,
            children=[node, self.leaf(dot), self.leaf(name)],
          )
          node.token = name
        else:
          node = self.other([node, self.leaf(dot), self.leaf(name)])
      elif self.at("("):
        if self.language == "java" and node.kind != "name":
          raise SourceSyntaxError("Java calls a method by name")
        args, puncts = self.arguments()
        node = Node("call", node.start, puncts[-1].end, callee=node, arguments=args, children=[node])
      elif self.at("["):
        open_tok = self.take()
        index = self.expression()
        node = self.other([node, self.leaf(open_tok), index, self.leaf(self.take("]"))])
      elif (
        self.language == "javascript"
        and self.peek() is not None
        and self.peek().kind == "template"
        and not self.peek().line_break_before
      ):
        node = self.other([node, self.leaf(self.take(), "string")])
      elif self.at("++") or self.at("--"):
        node = self.other([node, self.leaf(self.take())])
      elif self.language == "java" and self.at("::"):
        colons = self.take()
        name = self.take()
        if name.kind != "name":
          raise SourceSyntaxError(f"expected a method name after '::' at {name.start}")
        node = self.other([node, self.leaf(colons), self.leaf(name)])
      else:
        return node

  def primary(self) -> Node:
    tok = self.peek()
    if tok is None:
      raise SourceSyntaxError("unexpected end of text")
    if tok.kind in ("number", "string", "char", "template", "regex"):
      self.take()
      return self.leaf(tok, {"number": "token", "template": "token", "regex": "token"}.get(tok.kind, tok.kind))
    if tok.kind == "name":
      if tok.text == "new":
        return self.creation()
      if (
        self.language == "javascript"
        and tok.text in ("function", "async")
        and (
          self.at("(", 1)
          or self.at("function", 1)
          or (self.peek(1) is not None and self.peek(1).kind == "name" and self.at("(", 2))
        )
      ):
        return self.js_function()
      self.take()
      return self.leaf(tok, "name")
    if tok.text == "(":
      open_tok = self.take()
      if self.language == "javascript" and self.at(")"):
        inner = self.leaf(self.take())
        return self.other([self.leaf(open_tok), inner])
      inner = self.expression()
      parts = [self.leaf(open_tok), inner]
      while self.language == "javascript" and self.at(","):
        parts += [self.leaf(self.take()), self.expression()]
      return self.other(parts + [self.leaf(self.take(")"))])
    if tok.text == "[" and self.language == "javascript":
      return self.js_array()
    if tok.text == "{" and self.language == "javascript":
      return self.js_object()
    raise SourceSyntaxError(f"unexpected {tok.text!r} at {tok.start}")

  def js_function(self) -> Node:
    parts = []
    while not self.at("("):
      parts.append(self.leaf(self.take()))
    args, puncts = self.arguments()
    return self.other(parts + [self.leaf(puncts[0])] + args + [self.leaf(puncts[-1]), self.block()])

  def js_array(self) -> Node:
    parts = [self.leaf(self.take("["))]
    while not self.at("]"):
      if self.at(","):
        parts.append(self.leaf(self.take()))
        continue
      if self.at("..."):
        parts.append(self.leaf(self.take()))
      parts.append(self.assignment())
      if not self.at("]"):
        parts.append(self.leaf(self.take(",")))
    return self.other(parts + [self.leaf(self.take("]"))])

  def js_object(self) -> Node:
    parts = [self.leaf(self.take("{"))]
    while not self.at("}"):
      if self.at("..."):
        parts += [self.leaf(self.take()), self.assignment()]
      else:
        if self.at("["):
          open_tok = self.take()
          parts += [self.leaf(open_tok), self.expression(), self.leaf(self.take("]"))]
        else:
          key = self.take()
          if key.kind not in ("name", "string", "number"):
            raise SourceSyntaxError(f"bad object key {key.text!r}")
          parts.append(self.leaf(key, "string" if key.kind == "string" else "token"))
        if self.at(":"):
          parts += [self.leaf(self.take()), self.assignment()]
        elif self.at("("):
          args, puncts = self.arguments()
          parts += [self.leaf(puncts[0])] + args + [self.leaf(puncts[-1]), self.block()]
      if not self.at("}"):
        parts.append(self.leaf(self.take(",")))
    return self.other(parts + [self.leaf(self.take("}"))])

  def creation(self) -> Node:
    new = self.take("new")
    if self.language == "javascript":
      callee = self.primary()
      while self.at("."):
        callee = self.other([callee, self.leaf(self.take()), self.leaf(self.take())])
      if self.at("("):
        args, puncts = self.arguments()
        return self.other([self.leaf(new), callee, self.leaf(puncts[0])] + args + [self.leaf(puncts[-1])])
      return self.other([self.leaf(new), callee])
    type_tokens = self._type_tokens()
    if type_tokens[-1].text == "]" or self.at("["):
      dims = []
      while self.at("["):
        open_tok = self.take()
        if self.at("]"):
          dims += [open_tok, self.take()]
        else:
          dims.append(open_tok)
          self.expression()
          dims.append(self.take("]"))
      initializer = self.java_array_initializer() if self.at("{") else None
      if initializer is None and all(t.text in "[]" for t in dims) and type_tokens[-1].text != "]":
        raise SourceSyntaxError("array creation without size or initializer")
      while type_tokens and type_tokens[-1].text in ("[", "]"):
        type_tokens = type_tokens[:-1]
      end = initializer.end if initializer else dims[-1].end
      return Node("array_new", new.start, end, type_tokens=type_tokens, initializer=initializer)
    args, puncts = self.arguments()
    end = puncts[-1].end
    if self.at("{"):
      end = self.block().end
    return Node("object_new", new.start, end, type_tokens=type_tokens, arguments=args)

  def java_array_initializer(self) -> Node:
    parts = [self.leaf(self.take("{"))]
    while not self.at("}"):
      with self.nested():
        parts.append(self.java_array_initializer() if self.at("{") else self.expression())
      if not self.at("}"):
        parts.append(self.leaf(self.take(",")))
    return self.other(parts + [self.leaf(self.take("}"))])


# ------------------------------------------------------------------------------------------------ Java


def _java_render(node: Node, text: str, nested: bool) -> str:
  """A Java value as upstream's node walk renders it (module docstring)."""
  if node.kind in ("string", "char"):
    raw = node.token.text
    return raw if nested else raw[1:-1]
  if node.kind in ("call", "name"):
    return text[node.start : node.end]
  if node.kind == "token":
    return node.token.text
  if node.kind == "array_new":
    type_text = "".join(t.text for t in node.type_tokens)
    init = _java_render(node.initializer, text, True) if node.initializer is not None else ""
    if node.initializer is None:
      raise SourceSyntaxError("array creation without an initializer has no value upstream")
    return f"new {type_text}[]{init}"
  if node.kind == "object_new":
    type_text = "".join(t.text for t in node.type_tokens)
    return f"new {type_text}(" + ", ".join(_java_render(a, text, True) for a in node.arguments) + ")"
  return "".join(_java_render(c, text, True) for c in node.children)


def _first_call(node: Any) -> Node | None:
  if not isinstance(node, Node):
    return None
  if node.kind == "call":
    return node
  for child in (
    ([node.callee] if node.callee is not None else [])
    + node.children
    + node.arguments
    + ([node.initializer] if node.initializer is not None else [])
  ):
    found = _first_call(child)
    if found is not None:
      return found
  return None


def _add(arguments: dict[Any, Any], key: Any, value: Any) -> None:
  if key in arguments:
    raise SourceSyntaxError("Multiple arguments with the same name are not supported")
  arguments[key] = value


def parse_java(text: str) -> list[dict[str, dict[Any, Any]]] | dict:
  """The call of Java source text by the module's rules: `[{name: {key: value text}}]`, or {} for no call."""
  if len(text) > MAX_SOURCE:
    raise SourceSyntaxError(f"text of {len(text)} characters is over the {MAX_SOURCE} limit")
  parser = _Parser(text, "java")
  call = None
  for statement in parser.statements():
    call = _first_call(statement)
    if call is not None:
      break
  if call is None:
    return {}
  if call.token is not None:
    name = text[call.callee.start : call.callee.end] + "." + call.token.text
  else:
    name = call.callee.token.text
  arguments: dict[Any, Any] = {}
  for arg in call.arguments:
    if arg.kind == "assign":
      left, right = arg.children[0], arg.children[2]
      _add(arguments, text[left.start : left.end], _java_render(right, text, False))
    elif arg.kind == "name" and arg.token.text not in ("true", "false", "null", "this"):
      _add(arguments, None, arg.token.text)
  return [{name: arguments}]


# ------------------------------------------------------------------------------------------------ JavaScript


def parse_js(text: str) -> list[dict[str, dict[Any, Any]]] | None:
  """The call of JavaScript source text by the module's rules: `[{name: {key: value text}}]`, or None."""
  if len(text) > MAX_SOURCE:
    raise SourceSyntaxError(f"text of {len(text)} characters is over the {MAX_SOURCE} limit")
  for statement in _Parser(text, "javascript").statements():
    if statement.kind != "call":
      continue
    arguments: dict[Any, Any] = {}
    for arg in statement.arguments:
      if arg.kind == "assign":
        left, right = arg.children[0], arg.children[2]
        value = text[right.start : right.end]
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
          value = value[1:-1]
        elif len(value) == 1 and value in "\"'":
          value = ""
        _add(arguments, text[left.start : left.end], value)
      elif arg.kind == "name" and arg.token.text not in ("false", "null", "undefined", "this"):
        _add(arguments, None, arg.token.text)
    end = statement.token.end if statement.token is not None else statement.callee.end
    return [{text[statement.start : end]: arguments}]
  return None
