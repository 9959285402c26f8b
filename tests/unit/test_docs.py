"""The docs as the code cites them: every cited section exists, and the Layout names every module.

Citations. Code, configs, tests and docs cite a section of docs/DESIGN.md, docs/EXPERIMENTS.md, the README or
launch/README.md by name, quoted after the file's name and a comma (more sections may follow, each quoted:
`, "Another"`). A name is a heading of that file without its number ("Rooms" for "3. Rooms"), or the heading's opening
words up to a punctuation mark or a space ("Running a run" for "Running a run: TensorBoard, ..."). A section named
any other way (a number, unquoted words) is refused, so that a renamed heading cannot leave a citation behind.

Layout. The README's "Layout" and docs/DESIGN.md's "Rooms" each name every module of the package
(genenv_jax/**/*.py but `__init__.py`), and every `.py` file they name exists. A name belongs to the room whose entry
it sits in (README: the entry's first line starts with `room/` two spaces in, continued by deeper-indented lines;
DESIGN.md: a bullet opening with **`room/`**) and is read relative to the room; a bare file name (`evaluator.py`) the
room itself lacks names every module of that name under it; otherwise a name is read relative to genenv_jax/, then to
the repository. `{a,b}` stands for each of a and b.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "genenv_jax"

# The files whose sections are cited, by the name a citation gives them ("launch/README" is launch's own).
CITED = {
  "DESIGN": ROOT / "docs" / "DESIGN.md",
  "EXPERIMENTS": ROOT / "docs" / "EXPERIMENTS.md",
  "README": ROOT / "README.md",
  "launch/README": ROOT / "launch" / "README.md",
}
# A citation: the cited file, then ', "Section"' and any further quoted sections.
CITATION = re.compile(r"""(launch/)?\b(DESIGN|EXPERIMENTS|README)(?:\.md)?(?:'s)?,\s*((?:"[^"]+"(?:\s*,\s*)?)+)""")
# A section cited without its quoted name: 'DESIGN.md, section 3', 'DESIGN.md step 4', 'README, Planning'.
UNQUOTED = re.compile(
  r"\b(?:DESIGN|EXPERIMENTS|README)(?:\.md)?(?:'s)?"
  r"(?:,\s*(?:[A-Z0-9§]|the\b|section\b|step\b)|,?\s+(?:step|section|§)\s*\d)"
)
# Files other workers are editing (issue 33) that still cite a section that is gone; remove each once its file is
# fixed. Keys: (file, the citation's text as this test reads it).
PENDING: set[tuple[str, str]] = set()  # (file, citation) pairs to fix; none left


def _citing_files() -> list[pathlib.Path]:
  """Every text file that may cite a section: the package, tests, configs, launch scripts and the docs."""
  files = [*PACKAGE.rglob("*.py"), *(ROOT / "tests").rglob("*.py"), *(ROOT / "configs").glob("*.py")]
  files += [p for p in (ROOT / "launch").rglob("*") if p.is_file() and p.suffix in (".md", ".sh", ".py", ".yaml")]
  files += [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]
  return sorted(p for p in files if p != pathlib.Path(__file__).resolve())


def _joined(path: pathlib.Path) -> str:
  """The file's text with each line break (and a comment's leading '#') folded into one space, so that a citation
  broken over lines reads whole."""
  return re.sub(r"[ \t]*\n[ \t]*(?:#+[ \t]+)?", " ", path.read_text(encoding="utf-8"))


def headings(path: pathlib.Path) -> list[str]:
  """The file's Markdown headings (not the '#' lines of its code blocks), each without its '#'s and its number."""
  found, fenced = [], False
  for line in path.read_text(encoding="utf-8").splitlines():
    if line.startswith("```"):
      fenced = not fenced
    elif not fenced and (m := re.match(r"#{1,6}\s+(.+?)\s*$", line)):
      found.append(re.sub(r"^\d+(?:\.\d+)*\.?\s+", "", m.group(1)))
  return found


def names_heading(name: str, heading: str) -> bool:
  """Whether a cited `name` names `heading`: all of it, or its opening words up to a punctuation mark or a space."""
  return heading == name or (heading.startswith(name) and not heading[len(name)].isalnum())


def citations() -> list[tuple[str, str, str]]:
  """(citing file, cited file's key, section name) of every citation."""
  found = []
  for path in _citing_files():
    for m in CITATION.finditer(_joined(path)):
      key = "launch/README" if m.group(1) and m.group(2) == "README" else m.group(2)
      found += [(str(path.relative_to(ROOT)), key, name) for name in re.findall(r'"([^"]+)"', m.group(3))]
  return found


def test_citations_are_found():
  """The patterns see the citations this repository makes (a pattern that silently matched nothing would pass)."""
  found = {(key, name) for _, key, name in citations()}
  assert ("DESIGN", "Rooms") in found and ("README", "Planning") in found, sorted(found)
  assert ("EXPERIMENTS", "The text domains on a CPU") in found, sorted(found)
  assert names_heading("What the default shows", "What the default shows, and what it does not")
  assert not names_heading("What the default", "What the defaults")
  assert headings(CITED["DESIGN"])[:3] == ["genenv_jax design", "The method", "Architecture: how data flows"]


def test_every_cited_section_exists():
  titles = {key: headings(path) for key, path in CITED.items()}
  missing = [
    f"{where}: {key}, {name!r}"
    for where, key, name in citations()
    if (where, name) not in PENDING and not any(names_heading(name, t) for t in titles[key])
  ]
  assert not missing, "citations of sections that do not exist:\n" + "\n".join(missing)


def test_sections_are_cited_by_quoted_name():
  bad = []
  for path in _citing_files():
    where = str(path.relative_to(ROOT))
    for m in UNQUOTED.finditer(text := _joined(path)):
      cited = text[m.start() : m.end() + 30].split(")")[0].strip()
      if not any(where == f and cited.startswith(c) for f, c in PENDING):
        bad.append(f"{where}: {cited!r}")
  assert not bad, "sections cited without a quoted name (write FILE, \"Section\"):\n" + "\n".join(bad)


# ---- the Layout ------------------------------------------------------------------------------------------------------


def section(path: pathlib.Path, title: str) -> list[str]:
  """The lines of the Markdown section whose heading (without its number) is `title`, up to the next heading of the
  same or a higher level."""
  out, level, fenced = None, 0, False
  for line in path.read_text(encoding="utf-8").splitlines():
    fenced ^= line.startswith("```")
    m = None if fenced else re.match(r"(#{1,6})\s+(?:\d+(?:\.\d+)*\.?\s+)?(.+?)\s*$", line)
    if out is not None and m and len(m.group(1)) <= level:
      break
    if out is not None:
      out.append(line)
    elif m and m.group(2) == title:
      out, level = [], len(m.group(1))
  assert out is not None, f"{path.name} has no section {title!r}"
  return out


def readme_rooms() -> dict[str, str]:
  """The README Layout's entries in genenv_jax/: room ("" for the package root) -> the entry's text."""
  block = "\n".join(section(ROOT / "README.md", "Layout")).split("```")[1]
  rooms, room = {}, None
  for line in block.splitlines():
    if not line.startswith("  "):  # genenv_jax/ itself, and what lies beside the package
      room = None
      continue
    if not line.startswith("   "):  # an entry: `room/` or the root's commands
      m = re.match(r"  ([a-z_]+)/\s", line)
      room = m.group(1) if m else ""
    if room is not None:
      rooms[room] = rooms.get(room, "") + line + "\n"
  return rooms


def design_rooms() -> dict[str, str]:
  """DESIGN.md "Rooms"' bullets: room ("" for a bullet that is not one room's) -> its text."""
  rooms: dict[str, str] = {}
  for bullet in re.split(r"\n(?=- )", "\n".join(section(CITED["DESIGN"], "Rooms"))):
    m = re.match(r"- \*\*`([a-z_]+)/`\*\*", bullet)
    room = m.group(1) if m else ""
    rooms[room] = rooms.get(room, "") + bullet + "\n"
  return rooms


def _expand(name: str) -> list[str]:
  """`a/{b,c}.py` -> [`a/b.py`, `a/c.py`]."""
  m = re.search(r"\{([^{}]*)\}", name)
  if not m:
    return [name]
  return [x for part in m.group(1).split(",") for x in _expand(name[: m.start()] + part + name[m.end() :])]


def named_modules(rooms: dict[str, str]) -> tuple[set[pathlib.Path], list[str]]:
  """(the files the rooms' entries name, the names that name no file)."""
  named, unknown = set(), []
  for room, text in rooms.items():
    base = PACKAGE / room
    for token in re.findall(r"[\w/{},*]*[\w}]\.py\b", text):
      for name in _expand(token.strip("/")):
        matches = [base / name] if (base / name).is_file() else []
        if not matches and room and "/" not in name:
          matches = sorted(base.rglob(name))
        matches = matches or [p for p in (PACKAGE / name, ROOT / name) if p.is_file()][:1]
        if matches:
          named.update(matches)
        else:
          unknown.append(f"{room or 'genenv_jax'}/: {name}")
  return named, unknown


MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__init__.py")


@pytest.mark.parametrize("where,rooms", [("README, Layout", readme_rooms), ("DESIGN.md, Rooms", design_rooms)])
def test_layout_names_every_module_and_only_modules_that_exist(where, rooms):
  named, unknown = named_modules(rooms())
  assert not unknown, f"{where} names files that do not exist:\n" + "\n".join(unknown)
  unnamed = [str(p.relative_to(ROOT)) for p in MODULES if p not in named]
  assert not unnamed, f"{where} does not name these modules:\n" + "\n".join(unnamed)
