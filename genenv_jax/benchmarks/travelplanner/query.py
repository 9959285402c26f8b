"""The structured constraints of a TravelPlanner query, as the official evaluator reads them.

Field names and values follow the `osunlp/TravelPlanner` dataset that `evaluation/eval.py` loads: `org`, `dest` (a
city for 3-day trips, a state for 5- and 7-day trips), `days`, `visiting_city_number`, `date` (one YYYY-MM-DD per
day), `people_number`, `budget` (dollars), `level` (easy / medium / hard) and `local_constraint` with keys
"house rule" (smoking, parties, children under 10, visitors, pets), "cuisine" (a list of cuisine names), "room type"
(entire room, private room, shared room, not shared room) and "transportation" (no flight, no self-driving), each
None when the query sets no such constraint.

Those fields ship in no file of the travelplanner dataset for the 45 train queries, so they were transcribed from the
query texts into `data/travelplanner_train_constraints.json` (see tests/unit/benchmarks/test_travelplanner.py for the
checks against the texts and the gold plans).
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import pathlib
from typing import Any, Mapping

TRAIN_CONSTRAINTS_PATH = pathlib.Path(__file__).resolve().parent / "data" / "travelplanner_train_constraints.json"

HOUSE_RULES = ("smoking", "parties", "children under 10", "visitors", "pets")
ROOM_TYPES = ("entire room", "private room", "shared room", "not shared room")
TRANSPORTATION_RULES = ("no flight", "no self-driving")
LEVELS = ("easy", "medium", "hard")
LOCAL_KEYS = ("house rule", "cuisine", "room type", "transportation")


@dataclasses.dataclass(frozen=True)
class TravelQuery:
  """One query's constraints; `local_constraint` maps the four LOCAL_KEYS to a value or None."""

  idx: int
  org: str
  dest: str
  days: int
  visiting_city_number: int
  date: tuple[str, ...]
  people_number: int
  budget: float
  level: str
  local_constraint: Mapping[str, Any]

  def applicable_hard_constraints(self) -> int:
    """How many hard checks apply: the budget always, plus each local constraint that is not None (eval.py)."""
    return 1 + sum(self.local_constraint[key] is not None for key in LOCAL_KEYS)


def _require(condition: bool, where: str, message: str) -> None:
  if not condition:
    raise ValueError(f"{where}: {message}")


def query_from_json(record: Mapping[str, Any], where: str = "query") -> TravelQuery:
  """Validates one annotation record and builds a TravelQuery; raises ValueError naming the bad field."""
  for key in (
    "idx",
    "org",
    "dest",
    "days",
    "visiting_city_number",
    "date",
    "people_number",
    "budget",
    "level",
    "local_constraint",
  ):
    _require(key in record, where, f"missing field {key!r}")
  days, dates = record["days"], record["date"]
  _require(isinstance(days, int) and days > 0, where, f"'days' must be a positive int, got {days!r}")
  _require(isinstance(dates, list) and len(dates) == days, where, f"'date' must list {days} dates, got {dates!r}")
  for d in dates:
    try:
      datetime.date.fromisoformat(d)
    except (TypeError, ValueError):
      raise ValueError(f"{where}: 'date' entry {d!r} is not YYYY-MM-DD") from None
  _require(
    isinstance(record["people_number"], int) and record["people_number"] > 0,
    where,
    f"'people_number' must be a positive int, got {record['people_number']!r}",
  )
  _require(
    isinstance(record["budget"], (int, float)) and record["budget"] > 0,
    where,
    f"'budget' must be a positive number, got {record['budget']!r}",
  )
  _require(record["level"] in LEVELS, where, f"'level' must be one of {LEVELS}, got {record['level']!r}")
  local = record["local_constraint"]
  _require(
    isinstance(local, dict) and set(local) == set(LOCAL_KEYS),
    where,
    f"'local_constraint' must have exactly the keys {LOCAL_KEYS}, got {local!r}",
  )
  _require(local["house rule"] in (None, *HOUSE_RULES), where, f"bad house rule {local['house rule']!r}")
  _require(local["room type"] in (None, *ROOM_TYPES), where, f"bad room type {local['room type']!r}")
  _require(
    local["transportation"] in (None, *TRANSPORTATION_RULES),
    where,
    f"bad transportation rule {local['transportation']!r}",
  )
  cuisine = local["cuisine"]
  _require(
    cuisine is None or (isinstance(cuisine, list) and all(isinstance(c, str) for c in cuisine)),
    where,
    f"'cuisine' must be None or a list of strings, got {cuisine!r}",
  )
  return TravelQuery(
    idx=int(record["idx"]),
    org=str(record["org"]),
    dest=str(record["dest"]),
    days=days,
    visiting_city_number=int(record["visiting_city_number"]),
    date=tuple(dates),
    people_number=record["people_number"],
    budget=float(record["budget"]),
    level=record["level"],
    local_constraint={
      "house rule": local["house rule"],
      "cuisine": None if cuisine is None else tuple(cuisine),
      "room type": local["room type"],
      "transportation": local["transportation"],
    },
  )


def load_train_queries(path: str | pathlib.Path = TRAIN_CONSTRAINTS_PATH) -> tuple[TravelQuery, ...]:
  """The transcribed constraints of the 45 train queries, in train order (idx 0..44)."""
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"TravelPlanner train constraint annotations not found: {path}")
  records = json.loads(path.read_text(encoding="utf-8"))
  queries = tuple(query_from_json(r, f"{path.name} entry {i}") for i, r in enumerate(records))
  for i, q in enumerate(queries):
    _require(q.idx == i, f"{path.name} entry {i}", f"'idx' must be {i}, got {q.idx}")
  return queries
