"""TravelPlanner sole planning as a training task family (the "travelplanner" training domain).

Why not the 45 train queries: they are the only scorable TravelPlanner queries here, so they are the evaluation set
(`travelplanner.py`), and the validation queries ship neither constraints nor reference information. The seeds are
therefore written from the sandbox database itself (`travelplanner/database`, the source the evaluator checks plans
against): 3-day, one-city round trips between two cities of the city list with distances both ways,
1-3 people, dates in March 2022, and local constraints (room type, house rule, cuisine, transportation) drawn with a
fixed seed. A seed is kept only when the domain's own planner (`plan_trip`) finds a plan that passes every
commonsense and hard check; its budget is that plan's cost rounded up to the next 100 plus 100-300.

Env text format (one line, the structured query; the natural-language query and the reference information are
written by the domain, so they always agree with it):
  Trip: {"org": "Dallas", "dest": "Austin", "date": ["2022-03-05", "2022-03-06", "2022-03-07"], "people_number": 2,
         "budget": 1500, "local_constraint": {"house rule": null, "cuisine": ["Chinese"], "room type": null,
         "transportation": "no flight"}}

Parser rule (`parse`): a `Trip:` line whose JSON has exactly those keys; `travelplanner.query.query_from_json`
accepts it (days = 3, visiting_city_number = 1, level from the number of local constraints: 0 easy, 1 medium,
2+ hard); the dates are consecutive; org != dest, both in the city list; self-driving or taxi distances exist both
ways; the budget is at most 50,000; and the domain's planner finds a plan passing every check (the domain computes
that the task is solvable; it never trusts the env's budget). Gold text: the query JSON, canonical. Difficulty: the
number of local constraints plus people_number, plus 1 when the planner's plan uses over 80% of the budget.

Agent prompt: a compact sole-planning system prompt with `travelplanner.FORMAT_INSTRUCTION`; the user turn holds the
reference information (the first REF_ROWS accommodations, restaurants and attractions of the destination and the
driving / taxi figures both ways, from the database) and the query in words. No flights exist for these trips (the
flights table was never public), so the reference information says so. Score: `TravelPlannerBenchmark.score` on the
query with the database and no flights, i.e. passed checks / (8 + applicable hard checks); success needs the
domain's success_threshold (1.0 = a final pass).
"""

from __future__ import annotations

import dataclasses
import datetime
import functools
import json
import math
import pathlib
from typing import Any

import numpy as np

from genenv_jax.benchmarks.travelplanner.checks import PlanContext
from genenv_jax.benchmarks.travelplanner.database import (
  Database,
  distance_cost,
  find_accommodations,
  find_restaurant,
  load_database,
)
from genenv_jax.benchmarks.travelplanner.evaluator import FORMAT_INSTRUCTION, TravelPlannerBenchmark, TravelPlannerGold
from genenv_jax.benchmarks.travelplanner.hard import HOUSE_RULE_BANS, total_cost
from genenv_jax.benchmarks.travelplanner.plan import plan_to_text
from genenv_jax.benchmarks.travelplanner.query import (
  HOUSE_RULES,
  LOCAL_KEYS,
  ROOM_TYPES,
  TRANSPORTATION_RULES,
  TravelQuery,
  query_from_json,
)
from genenv_jax.tasks.benchmark import EvalItem
from genenv_jax.tasks.text_domain import ParsedTask

DAYS, REF_ROWS, MAX_BUDGET = 3, 8, 50_000
TRIP_KEYS = ("org", "dest", "date", "people_number", "budget", "local_constraint")
_SCORER = TravelPlannerBenchmark()
ROOM_OK = {
  "not shared room": lambda t: t != "Shared room",
  "shared room": lambda t: t == "Shared room",
  "private room": lambda t: t == "Private room",
  "entire room": lambda t: t == "Entire home/apt",
}
SYSTEM_PROMPT = (
  "You are a proficient planner. Based on the provided information and query, give a detailed plan with "
  "restaurant, attraction and accommodation names. All information in your plan must come from the provided "
  "data and align with commonsense. '-' marks information that is unnecessary, e.g. after returning to the "
  "departure city.\n\n" + FORMAT_INSTRUCTION
)


def write_task(trip: dict[str, Any]) -> str:
  """The canonical env text of a trip (keys in TRIP_KEYS and LOCAL_KEYS order)."""
  canonical = {k: trip[k] for k in TRIP_KEYS}
  canonical["local_constraint"] = {k: trip["local_constraint"][k] for k in LOCAL_KEYS}
  return "Trip: " + json.dumps(canonical, ensure_ascii=False)


def _drive(db: Database, org: str, dest: str, rule: str | None) -> str | None:
  """The transportation field of a driving (or, with "no self-driving", taxi) leg, or None when impossible."""
  mode, label = ("taxi", "Taxi") if rule == "no self-driving" else ("self-driving", "Self-driving")
  cost = distance_cost(db, org, dest, mode)
  if cost is None:
    return None
  duration, distance = db.distances[(org, dest)]
  return f"{label}, from {org} to {dest}, duration: {duration}, distance: {distance}, cost: {cost}"


def reference_rows(db: Database, city: str) -> tuple[list[Any], list[Any], list[Any]]:
  """(accommodations, restaurants, attractions) shown for a city: the first REF_ROWS of each whose name looks up to
  itself (the evaluator takes the first substring match)."""
  acc = [a for a in db.accommodations.get(city, ()) if find_accommodations(db, a.name, city)[0] == a][:REF_ROWS]
  rest = [r for r in db.restaurants.get(city, ()) if find_restaurant(db, r.name, city) == r][:REF_ROWS]
  attr = list(dict.fromkeys(a.name for a in db.attractions.get(city, ())))[:REF_ROWS]
  return acc, rest, attr


def plan_trip(db: Database, q: TravelQuery) -> list[dict[str, Any]] | None:
  """A greedy 3-day plan over the reference rows that respects the local constraints, or None."""
  local = q.local_constraint
  acc, rest, attr = reference_rows(db, q.dest)
  there, back = _drive(db, q.org, q.dest, local["transportation"]), _drive(db, q.dest, q.org, local["transportation"])
  if there is None or back is None or len(attr) < 3:
    return None
  stays = [
    a
    for a in acc
    if a.minimum_nights <= DAYS - 1
    and ROOM_OK.get(local["room type"], lambda t: True)(a.room_type)
    and (local["house rule"] is None or HOUSE_RULE_BANS[local["house rule"]] not in a.house_rules)
  ]
  if not stays:
    return None
  stay = min(stays, key=lambda a: a.price * math.ceil(q.people_number / a.maximum_occupancy))
  wanted = list(local["cuisine"] or ())
  first = [r for c in wanted for r in rest if c in r.cuisines][: len(wanted)]
  meals = list(dict.fromkeys(first + sorted(rest, key=lambda r: r.average_cost)))[:6]
  if len(meals) < 6:
    return None
  m = [f"{r.name}, {q.dest}" for r in meals]
  a = [f"{name}, {q.dest};" for name in attr]
  home = f"{stay.name}, {q.dest}"
  return [
    {
      "days": 1,
      "current_city": f"from {q.org} to {q.dest}",
      "transportation": there,
      "breakfast": "-",
      "attraction": a[0],
      "lunch": m[0],
      "dinner": m[1],
      "accommodation": home,
    },
    {
      "days": 2,
      "current_city": q.dest,
      "transportation": "-",
      "breakfast": m[2],
      "attraction": a[1],
      "lunch": m[3],
      "dinner": m[4],
      "accommodation": home,
    },
    {
      "days": 3,
      "current_city": f"from {q.dest} to {q.org}",
      "transportation": back,
      "breakfast": m[5],
      "attraction": a[2],
      "lunch": "-",
      "dinner": "-",
      "accommodation": "-",
    },
  ]


def query_text(q: TravelQuery) -> str:
  local = q.local_constraint
  parts = [
    f"Please plan a {q.days}-day trip for {q.people_number} "
    f"{'person' if q.people_number == 1 else 'people'} from {q.org} to {q.dest}, from {q.date[0]} to "
    f"{q.date[-1]}, with a budget of ${q.budget:g}."
  ]
  if local["house rule"]:
    parts.append(f"The accommodation must allow {local['house rule']}.")
  if local["room type"]:
    parts.append(f"We want a {local['room type']}.")
  if local["cuisine"]:
    parts.append(f"We want to try {', '.join(local['cuisine'])} cuisine.")
  if local["transportation"]:
    parts.append(f"Transportation: {local['transportation']}.")
  return " ".join(parts)


def reference_text(db: Database, q: TravelQuery) -> str:
  acc, rest, attr = reference_rows(db, q.dest)
  lines = [f"Flights: there is no flight between {q.org} and {q.dest}."]
  for org, dest in ((q.org, q.dest), (q.dest, q.org)):
    duration, distance = db.distances[(org, dest)]
    for mode, label in (("self-driving", "Self-driving"), ("taxi", "Taxi")):
      lines.append(
        f"{label} from {org} to {dest}, duration: {duration}, distance: {distance}, cost: "
        f"{distance_cost(db, org, dest, mode)}"
      )
  lines.append(
    f"Accommodations in {q.dest} (name | price per night | room type | house rules | minimum nights | "
    "maximum occupancy):"
  )
  lines += [
    f"{x.name} | {x.price:g} | {x.room_type} | {x.house_rules} | {x.minimum_nights:g} | {x.maximum_occupancy:g}"
    for x in acc
  ]
  lines.append(f"Restaurants in {q.dest} (name | average cost | cuisines):")
  lines += [f"{r.name} | {r.average_cost:g} | {r.cuisines}" for r in rest]
  lines.append(f"Attractions in {q.dest}: " + "; ".join(attr))
  return "\n".join(lines)


@dataclasses.dataclass(frozen=True)
class TravelPlannerTasks:
  """The TravelPlanner family (module docstring); `num_candidates` seed trips are drawn with `seed`."""

  data_dir: str
  num_candidates: int = 400
  seed: int = 0
  name: str = "travelplanner"
  env_instruction: str = (
    "You write travel-planning requests. Write one line 'Trip: <JSON with org, dest, date (3 consecutive "
    "YYYY-MM-DD dates), people_number, budget, local_constraint {house rule, cuisine, room type, "
    "transportation}>' for a 3-day round trip. Nothing else."
  )

  @functools.cached_property
  def db(self) -> Database:
    return load_database(self.data_dir)

  def seed_texts(self, data_dir: pathlib.Path) -> list[str]:
    db, rng = self.db, np.random.default_rng(self.seed)
    cities = {c for c in db.city_states if c in db.accommodations and c in db.restaurants}
    pairs = sorted(
      (o, d) for o, d in db.distances if o != d and o in db.city_states and d in cities and (d, o) in db.distances
    )
    out = []
    for _ in range(self.num_candidates):
      org, dest = pairs[int(rng.integers(0, len(pairs)))]
      start = datetime.date(2022, 3, 1) + datetime.timedelta(days=int(rng.integers(0, 28)))
      local: dict[str, Any] = {k: None for k in LOCAL_KEYS}
      for key, options in (
        ("house rule", HOUSE_RULES),
        ("room type", ROOM_TYPES),
        ("transportation", TRANSPORTATION_RULES),
      ):
        if rng.random() < 0.25:
          local[key] = str(options[int(rng.integers(0, len(options)))])
      if rng.random() < 0.25 and db.restaurants.get(dest):
        cuisines = reference_rows(db, dest)[1][0].cuisines.split(", ") if reference_rows(db, dest)[1] else []
        local["cuisine"] = cuisines[:1] or None
      trip = {
        "org": org,
        "dest": dest,
        "date": [str(start + datetime.timedelta(days=d)) for d in range(DAYS)],
        "people_number": int(rng.integers(1, 4)),
        "budget": MAX_BUDGET,
        "local_constraint": local,
      }
      query = self._query(trip)
      plan = None if query is None else plan_trip(db, query)
      if plan is None:
        continue
      cost = total_cost(PlanContext(query, db, ()), plan)
      trip["budget"] = int(math.ceil(cost / 100.0) * 100 + 100 * int(rng.integers(1, 4)))
      out.append(write_task(trip))
    return out

  def _query(self, trip: dict[str, Any]) -> TravelQuery | None:
    local = trip.get("local_constraint")
    if not isinstance(local, dict):
      return None
    n_local = sum(v is not None for v in local.values())
    record = {
      "idx": 0,
      "days": DAYS,
      "visiting_city_number": 1,
      "level": ("easy", "medium", "hard")[min(n_local, 2)],
      **{k: trip[k] for k in TRIP_KEYS},
    }
    try:
      q = query_from_json(record, "trip")
      days = [datetime.date.fromisoformat(d) for d in q.date]
    except (ValueError, TypeError, KeyError):
      return None
    if any((b - a).days != 1 for a, b in zip(days, days[1:])) or q.org == q.dest:
      return None
    if q.org not in self.db.city_states or q.dest not in self.db.city_states or q.budget > MAX_BUDGET:
      return None
    if (q.org, q.dest) not in self.db.distances or (q.dest, q.org) not in self.db.distances:
      return None
    return q

  def parse(self, text: str) -> ParsedTask | None:
    if not isinstance(text, str) or "\n" in text.strip() or not text.strip().startswith("Trip: "):
      return None
    try:
      trip = json.loads(text.strip()[len("Trip: ") :])
    except (ValueError, RecursionError):
      return None
    if not isinstance(trip, dict) or set(trip) != set(TRIP_KEYS):
      return None
    q = self._query(trip)
    plan = None if q is None else plan_trip(self.db, q)
    if plan is None:
      return None
    ctx = PlanContext(q, self.db, ())
    detail = _SCORER.score(EvalItem("check", "train", (), TravelPlannerGold(q, tuple(plan), ctx)), plan_to_text(plan))
    if not detail.correct:
      return None
    messages = (
      {"role": "system", "content": SYSTEM_PROMPT},
      {"role": "user", "content": f"Given information:\n{reference_text(self.db, q)}\n\nQuery: {query_text(q)}"},
    )
    tight = total_cost(ctx, plan) > 0.8 * q.budget
    difficulty = sum(v is not None for v in q.local_constraint.values()) + q.people_number + int(tight)
    return ParsedTask(messages, write_task(trip), float(difficulty))

  def _gold(self, gold: str) -> tuple[TravelQuery, PlanContext] | None:
    trip = json.loads(gold[len("Trip: ") :])
    q = self._query(trip)
    return None if q is None else (q, PlanContext(q, self.db, ()))

  def oracle(self, gold: str) -> str | None:
    parsed = self._gold(gold)
    plan = None if parsed is None else plan_trip(self.db, parsed[0])
    return None if plan is None else plan_to_text(plan)

  def score(self, gold: str, output: str) -> float:
    parsed = self._gold(gold)
    if parsed is None:
      return 0.0
    q, ctx = parsed
    return _SCORER.score(EvalItem("generated", "train", (), TravelPlannerGold(q, (), ctx)), output).score
