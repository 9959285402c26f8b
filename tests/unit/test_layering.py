"""The package's rooms depend only downward (docs/DESIGN.md, "Rooms"), checked on every import statement."""

import ast
import pathlib

import genenv_jax

PACKAGE = pathlib.Path(genenv_jax.__file__).parent

# Lowest first: a room may import only rooms listed before it (and itself).
ORDER = [
  "choices",
  "parallel",
  "models",
  "data",
  "reporting",
  "sampling",
  "rl",
  "tasks",
  "benchmarks.parsing",
  "benchmarks.<one>",
  "benchmarks",
  "coevolution",
  "training",
  "evaluation",
  "planning",
  "<commands>",
]
# Benchmarks sit side by side: none imports another, except these (importer, imported): reason.
BENCHMARK_EXCEPTIONS = {
  (
    "benchmarks.bamboogle",
    "benchmarks.travelplanner",
  ): "the closed-book QA family writes its questions from TravelPlanner's sandbox tables"
}


def room_of(module: str) -> str:
  """genenv_jax.a.b.c -> its room: 'models', 'benchmarks.bfcl', '<commands>' (root modules, bench/, scripts/, and a
  room's __main__, the command `python -m genenv_jax.ROOM`)."""
  parts = module.split(".")[1:]
  if not parts or parts[0] in ("bench", "scripts") or parts[-1] == "__main__" or not (PACKAGE / parts[0]).is_dir():
    return "<commands>"
  if parts[0] == "benchmarks" and len(parts) > 2 and (PACKAGE / "benchmarks" / parts[1]).is_dir():
    return f"benchmarks.{parts[1]}"
  return parts[0]


def rank(room: str) -> int:
  return ORDER.index("benchmarks.<one>" if room.startswith("benchmarks.") and room not in ORDER else room)


def imports_of(path: pathlib.Path) -> list[str]:
  names = []
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("genenv_jax"):
      names += [node.module + "." + alias.name for alias in node.names]
    elif isinstance(node, ast.Import):
      names += [alias.name for alias in node.names if alias.name.startswith("genenv_jax")]
  return names


def resolve(name: str) -> str:
  """The longest prefix of a dotted import that is a module or package of genenv_jax."""
  parts = name.split(".")
  while len(parts) > 1:
    target = PACKAGE.parent.joinpath(*parts)
    if target.is_dir() or target.with_suffix(".py").is_file():
      return ".".join(parts)
    parts.pop()
  return "genenv_jax"


def test_room_order_names_every_room():
  rooms = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()} - {"bench", "scripts"}
  assert rooms <= set(ORDER), f"rooms missing from ORDER (and docs/DESIGN.md): {sorted(rooms - set(ORDER))}"


def test_dependencies_point_downward():
  violations = []
  for path in sorted(PACKAGE.rglob("*.py")):
    module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
    src = room_of(module)
    for name in imports_of(path):
      dst = room_of(resolve(name))
      if dst == src or (dst, src) == ("<commands>", "<commands>"):
        continue
      if src.startswith("benchmarks.") and dst.startswith("benchmarks.") and "benchmarks.parsing" not in (src, dst):
        if (src, dst) not in BENCHMARK_EXCEPTIONS:
          violations.append(f"{module} imports {name}: a benchmark never imports another")
        continue
      if rank(dst) > rank(src):
        violations.append(f"{module} ({src}) imports {name} ({dst}), a room above it")
  assert not violations, "\n".join(violations)


def test_the_task_interface_and_text_adapter_know_no_domain():
  """tasks/ itself (the interface, token operations, the text adapter) never imports a task family: the arithmetic
  domain (tasks/arithmetic/) and the benchmarks build on it, not the other way round."""
  offenders = []
  for path in sorted((PACKAGE / "tasks").glob("*.py")):
    for name in imports_of(path):
      if name.startswith(("genenv_jax.tasks.arithmetic", "genenv_jax.benchmarks")):
        offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
  assert offenders == []


MAX_FUNCTION_LINES = (
  100  # issue 33: ruff's PLR0915 and C901 (pyproject.toml) bound statements and branches; this, lines
)


def test_no_function_runs_past_100_lines():
  long = []
  for path in sorted(PACKAGE.rglob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_FUNCTION_LINES:
          long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({lines} lines)")
  assert not long, "split these functions: " + "; ".join(long)
