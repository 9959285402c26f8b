"""The metric table (genenv_jax/reporting/metric_table.py): each metric declared once, and the modules that emit, log,
summarise, report and compare the metrics read it instead of quoting tags, descriptions or plot titles."""

import ast
import pathlib
import re

from genenv_jax import compare
from genenv_jax.reporting import metric_table as mt
from genenv_jax.reporting import summary_report
from genenv_jax.training import log_tags, loop

PACKAGE = pathlib.Path(mt.__file__).parents[1]
TABLE = pathlib.Path(mt.__file__)


def string_literals(source: str) -> list[tuple[int, str]]:
  """(line, text) of every string literal of a module, the literal parts of its f-strings included. Docstrings are
  left out: they name tags in prose, and the code never reads them."""
  tree = ast.parse(source)
  docstrings = set()
  for node in ast.walk(tree):
    if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
      first = node.body[0]
      if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        docstrings.add(id(first.value))
  return sorted(
    (node.lineno, node.value)
    for node in ast.walk(tree)
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
  )


def declared_names() -> set[str]:
  """Every tag and tag prefix the table declares: the table's tags (a family's "*" dropped), the tags of its two
  families (DESCRIPTIONS), and its string constants of a tag's form, "topic/name" (module-level, or a dict
  constant's values: WARM_START_LOSS)."""
  names = {m.tag.removesuffix("*") for m in mt.METRICS} | set(mt.DESCRIPTIONS)
  for name, value in vars(mt).items():
    if name.isupper():
      values = value.values() if isinstance(value, dict) else [value]
      names |= {v for v in values if isinstance(v, str) and re.fullmatch(r"[a-z_]+/[a-z0-9_]*", v)}
  return names


TOPICS = tuple(sorted({name.split("/")[0] + "/" for name in declared_names()}))  # "agent/", "curriculum/", ...


def tag_literals(source: str) -> list[tuple[int, str]]:
  """The literals of a module that are a declared tag or prefix, or start with a tag's topic ("pool/{pool}_size")."""
  names = declared_names()
  return [(line, text) for line, text in string_literals(source) if text in names or text.startswith(TOPICS)]


def test_each_metric_is_declared_once():
  tags = [m.tag for m in mt.METRICS]
  assert len(tags) == len(set(tags))
  titles = [m.plot for m in mt.METRICS if m.plot]
  assert len(titles) == len(set(titles))
  assert {"agent/", "curriculum/", "env/", "eval/", "examples/", "perf/", "pool/", "run/", "warm_start/"} == set(TOPICS)


def test_each_tag_is_written_once_in_the_package():
  """A tag, or a prefix a tag is built from, is written as a literal in the table and nowhere else in the package:
  every other module names it through the table (`mt.BAND_FRAC`, `mt.pool_tag`, `mt.AGENT + name`, ...). Each
  literal found elsewhere is named by its file and line."""
  table = [text for _, text in tag_literals(TABLE.read_text())]
  assert sorted({t for t in table if table.count(t) > 1}) == [], "written twice in reporting/metric_table.py"
  second = []
  for path in sorted(PACKAGE.rglob("*.py")):
    if path != TABLE:
      where = path.relative_to(PACKAGE.parent)
      second += [f"{where}:{line}: {text!r}" for line, text in tag_literals(path.read_text())]
  assert second == [], "tags written outside reporting/metric_table.py (use its names):\n" + "\n".join(second)


def test_the_scan_finds_a_quoted_tag_and_a_built_one_but_no_docstring():
  source = '"""Logs "curriculum/band_frac"."""\nx = {"curriculum/band_frac": 1}\ny = f"pool/{pool}_size"\nz = "band"\n'
  assert tag_literals(source) == [(2, "curriculum/band_frac"), (3, "pool/")]


def test_no_module_quotes_a_description_or_title():
  texts = set(mt.DESCRIPTIONS.values()) | {m.plot for m in mt.METRICS if m.plot}
  quoted = []
  for path in sorted(PACKAGE.rglob("*.py")):
    if path != TABLE:
      where = path.relative_to(PACKAGE.parent)
      quoted += [f"{where}:{line}: {text!r}" for line, text in string_literals(path.read_text()) if text in texts]
  assert quoted == []


def test_the_built_tags_are_the_tables():
  """The tags the step builds from a prefix are the ones the table declares."""
  split = {mt.from_seeds(tag, source) for tag in (mt.P_HAT_MEAN, mt.DIFFICULTY_MEAN) for source in mt.SEED_SOURCES}
  assert split <= set(mt.BY_TAG) and all(mt.BY_TAG[t].when == "fresh_tasks" for t in split)
  assert {mt.CURRICULUM + f"difficulty_{stat}" for stat in ("mean", "std", "max")} <= set(mt.BY_TAG)
  assert set(mt.WARM_START_LOSS.values()) <= set(mt.BY_TAG)


def test_the_collections_are_the_tables():
  assert loop.SUMMARY_KEYS == mt.SUMMARY_KEYS and loop.PROGRESS_KEYS == mt.PROGRESS_KEYS
  assert summary_report.STEP_FIGURES == mt.PLOTS and summary_report.OLD_ROW_KEYS == mt.OLD_ROW_KEYS
  assert compare.TRAJECTORIES == mt.FRESH_PLOTS and set(compare.TRAJECTORIES) <= set(mt.PLOTS)
  assert log_tags.FRESH_TASKS == mt.tags("fresh_tasks") and all(
    log_tags.DESCRIPTIONS[m.tag] == m.description for m in mt.METRICS
  )
  assert mt.PROGRESS_KEYS == (mt.REWARD_MEAN, mt.P_HAT_MEAN, mt.BAND_FRAC, mt.DIFFICULTY_MEAN)
