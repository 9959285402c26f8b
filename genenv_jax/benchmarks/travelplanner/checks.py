"""TravelPlanner's eight commonsense checks, as `evaluation/commonsense_constraint.py` (OSU-NLP-Group/TravelPlanner)
defines them. Each check reads the plan's first min(days, len(plan)) day dicts and returns a `Verdict`.

| key here                        | official function                      | paper term                |
|---------------------------------|----------------------------------------|---------------------------|
| within_sandbox                  | is_valid_information_in_sandbox        | Within Sandbox            |
| complete_information            | is_not_absent                          | Complete Information      |
| within_current_city             | is_valid_information_in_current_city   | Within Current City       |
| reasonable_city_route           | is_reasonable_visiting_city            | Reasonable City Route     |
| diverse_restaurants             | is_valid_restaurants                   | Diverse Restaurants       |
| diverse_attractions             | is_valid_attractions                   | Diverse Attractions       |
| non_conflicting_transportation  | is_valid_transportation                | Non-conf. Transportation  |
| minimum_nights_stay             | is_valid_accommodaton                  | Minimum Nights Stay       |

Reproduced as the official code behaves, quirks included (the paper's numbers come from it):
- Within Current City: on a day whose current_city has no "from", the city is a plain string and the official loops
  run over its characters: a meal or attraction passes if any character of the city occurs in it, transportation if
  every character does, the accommodation if the city's last character does. (Gold plan 41 lists San Angelo
  attractions on a San Antonio day and passes only this way.)
- Flights are looked up by number, origin and destination (not date); here in the query's reference flights, since
  the full flights table was never released (so a real flight listed only for another query does not count, where
  the official global table would accept it; sole planning shows the planner only its own query's flights).
Where the official code would raise on malformed input (a missing key, a non-string field, "from X" without "to"),
the check fails instead, with the exception in its reason: malformed output scores 0, never raises.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, NamedTuple, Sequence

from genenv_jax.benchmarks.travelplanner import fields
from genenv_jax.benchmarks.travelplanner.database import (
  Database,
  Flight,
  distance_cost,
  find_accommodations,
  find_attraction,
  find_restaurant,
)
from genenv_jax.benchmarks.travelplanner.query import TravelQuery

Plan = Sequence[Mapping[str, Any]]


class Verdict(NamedTuple):
  """A check's outcome: passed is True / False, or None when the constraint does not apply; reason says why not."""

  passed: bool | None
  reason: str | None = None


PASS = Verdict(True)


@dataclasses.dataclass(frozen=True)
class PlanContext:
  """What the checks read besides the plan: the query constraints, the sandbox and the query's reference flights."""

  query: TravelQuery
  database: Database
  flights: tuple[Flight, ...]


def _days(ctx: PlanContext, plan: Plan) -> Sequence[Mapping[str, Any]]:
  return plan[: min(ctx.query.days, len(plan))]


def _route_cities(ctx: PlanContext, plan: Plan) -> tuple[list[str], Verdict | None]:
  """Cities of the days in order ("from A to B" gives A, B); a Verdict when day 1 does not leave from org."""
  cities: list[str] = []
  for i, unit in enumerate(_days(ctx, plan)):
    value = unit["current_city"]
    if "from" in value:
      a, b = fields.from_to(value)
      a, b = fields.before_parenthesis(a), fields.before_parenthesis(b)
      if i == 0 and a != ctx.query.org:
        return cities, Verdict(False, f"The first day's city should be {ctx.query.org}.")
      cities += [a, b]
    else:
      cities.append(fields.before_parenthesis(value))
  return cities, None


def _valid_city_sequence(cities: Sequence[str]) -> bool:
  """Official `is_valid_city_sequence`: >= 3 entries; inner cities appear in one run of length >= 2, never again."""
  if len(cities) < 3:
    return False
  visited: set[str] = set()
  i = 0
  while i < len(cities):
    city = cities[i]
    if city in visited and i != 0 and i != len(cities) - 1:
      return False
    count = 0
    while i < len(cities) and cities[i] == city:
      count += 1
      i += 1
    if count == 1 and 0 < i - 1 < len(cities) - 1:
      return False
    visited.add(city)
  return True


def reasonable_city_route(ctx: PlanContext, plan: Plan) -> Verdict:
  """Starts at org, ends where it started, valid sequence, known cities; inner cities in dest's state if days > 3."""
  cities, early = _route_cities(ctx, plan)
  if early is not None:
    return early
  if cities[0] != cities[-1]:
    return Verdict(False, "The trip should be a closed circle.")
  if not _valid_city_sequence(cities):
    return Verdict(False, "The city sequence is invalid.")
  states = ctx.database.city_states
  for idx, city in enumerate(cities):
    if city not in states:
      return Verdict(False, f"{city} is not a valid city.")
    if idx not in (0, len(cities) - 1) and ctx.query.days > 3 and states[city] != ctx.query.dest:
      return Verdict(False, f"{city} is not in {ctx.query.dest}.")
  return PASS


def diverse_restaurants(ctx: PlanContext, plan: Plan) -> Verdict:
  """No restaurant entry (the exact meal string) is used twice."""
  seen: list[str] = []
  for i, unit in enumerate(_days(ctx, plan)):
    for meal in fields.MEALS:
      if meal in unit and fields.is_filled(unit[meal]):
        if unit[meal] in seen:
          return Verdict(False, f"The restaurant in day {i + 1} {meal} is repeated.")
        seen.append(unit[meal])
  return PASS


def diverse_attractions(ctx: PlanContext, plan: Plan) -> Verdict:
  """No attraction entry (';'-terminated) is visited twice."""
  seen: list[str] = []
  for i, unit in enumerate(_days(ctx, plan)):
    if "attraction" in unit and fields.is_filled(unit["attraction"]):
      for attraction in fields.attraction_entries(unit["attraction"]):
        if attraction in seen:
          return Verdict(False, f"The attraction '{attraction}' in day {i + 1} is repeated.")
        seen.append(attraction)
  return PASS


def non_conflicting_transportation(ctx: PlanContext, plan: Plan) -> Verdict:
  """Day 1 has transport; self-driving is never mixed with flights or taxis."""
  first = plan[0]["transportation"]
  if not fields.is_filled(first):
    return Verdict(False, "The transportation in day 1 should not be empty.")
  kinds = {fields.transport_kind(first)}
  for unit in _days(ctx, plan):
    if "transportation" in unit and fields.is_filled(unit["transportation"]):
      kinds.add(fields.transport_kind(unit["transportation"]))
  if "Self-driving" in kinds and ("Flight" in kinds or "Taxi" in kinds):
    return Verdict(False, "The transportation is conflicting.")
  return PASS


def within_current_city(ctx: PlanContext, plan: Plan) -> Verdict:
  """Every entry names the day's city (or one of "from A to B"); see the module note on one-city days."""
  for i, unit in enumerate(_days(ctx, plan)):
    value = unit["current_city"]
    if "from" in value:
      a, b = fields.from_to(value)
      cities: Sequence[str] = [fields.before_parenthesis(a), fields.before_parenthesis(b)]
    else:
      cities = fields.before_parenthesis(value)  # a str: iterated per character, as the official code does
    if "transportation" in unit and fields.is_filled(unit["transportation"]):
      if any(city not in unit["transportation"] for city in cities):
        return Verdict(False, f"The transportation in day {i + 1} is invalid city choice.")
    for meal in fields.MEALS:
      if meal in unit and fields.is_filled(unit[meal]) and not any(city in unit[meal] for city in cities):
        return Verdict(False, f"The {meal} in day {i + 1} is invalid city choice.")
    if "attraction" in unit and fields.is_filled(unit["attraction"]):
      for attraction in fields.attraction_entries(unit["attraction"]):
        if not any(city in attraction for city in cities):
          return Verdict(False, f"The attraction in day {i + 1} is invalid city choice.")
    if "accommodation" in unit and fields.is_filled(unit["accommodation"]):
      if cities[-1] not in unit["accommodation"]:
        return Verdict(False, f"The accommodation in day {i + 1} is invalid city choice.")
  return PASS


def _transport_in_sandbox(ctx: PlanContext, unit: Mapping[str, Any], day: int) -> Verdict:
  value = unit["transportation"]
  org, dest = fields.from_to(value)
  if org is None or dest is None:
    org, dest = fields.from_to(unit["current_city"])
  if "flight number" in value.lower():
    org, dest = fields.before_parenthesis(org), fields.before_parenthesis(dest)
    number = fields.flight_number(value)
    if not any(f.number == number and f.origin == org and f.destination == dest for f in ctx.flights):
      return Verdict(False, f"The flight number in day {day} is invalid in the sandbox.")
  elif "self-driving" in value.lower() or "taxi" in value.lower():
    try:
      org, dest = fields.before_parenthesis(org), fields.before_parenthesis(dest)
    except TypeError:
      org, dest = "-", "-"
    mode = "self-driving" if "self-driving" in value.lower() else "taxi"
    if distance_cost(ctx.database, org, dest, mode) is None:
      return Verdict(False, f"The {mode} in day {day} is invalid in the sandbox.")
  return PASS


def within_sandbox(ctx: PlanContext, plan: Plan) -> Verdict:
  """Every flight, drive, taxi, restaurant, attraction and accommodation exists in the sandbox."""
  db = ctx.database
  for i, unit in enumerate(_days(ctx, plan)):
    if fields.is_filled(unit["transportation"]):
      verdict = _transport_in_sandbox(ctx, unit, i + 1)
      if not verdict.passed:
        return verdict
    for meal in fields.MEALS:
      if meal in unit and fields.is_filled(unit[meal]) and find_restaurant(db, *fields.name_city(unit[meal])) is None:
        return Verdict(False, f"The {meal} in day {i + 1} is invalid in the sandbox.")
    if "attraction" in unit and fields.is_filled(unit["attraction"]):
      for attraction in fields.attraction_entries(unit["attraction"]):
        if find_attraction(db, *fields.name_city(attraction)) is None:
          return Verdict(False, f"The attraction {attraction} in day {i + 1} is invalid in the sandbox.")
    if "accommodation" in unit and fields.is_filled(unit["accommodation"]):
      if not find_accommodations(db, *fields.name_city(unit["accommodation"])):
        return Verdict(False, f"The accommodation in day {i + 1} is invalid in the sandbox.")
  return PASS


def minimum_nights_stay(ctx: PlanContext, plan: Plan) -> Verdict:
  """Each run of consecutive nights at one accommodation is >= its minimum nights (when the name matches exactly
  one sandbox row, as officially)."""
  stays: list[Any] = []
  for unit in _days(ctx, plan):
    if "accommodation" not in unit:
      return Verdict(False, "No Accommodation Info.")
    stays.append(unit["accommodation"])
  runs: list[list[Any]] = []
  for value in stays:
    if runs and runs[-1][0] == value:
      runs[-1][1] += 1
    else:
      runs.append([value, 1])
  for value, nights in runs:
    if value not in ("-", ""):
      rows = find_accommodations(ctx.database, *fields.name_city(value))
      if len(rows) == 1 and nights < rows[0].minimum_nights:
        return Verdict(False, f"The accommodation {value} do not obey the minumum nights rule.")
  return PASS


def _valid_days(ctx: PlanContext, plan: Plan) -> bool:
  filled = sum(1 for unit in _days(ctx, plan) if unit != {} and unit["current_city"] != fields.NO_MORE_DAYS)
  return filled == ctx.query.days


def _valid_visiting_city_number(ctx: PlanContext, plan: Plan) -> bool:
  cities, early = _route_cities(ctx, plan)
  if early is not None:
    return False
  visited = set(cities) - {ctx.query.org}
  return len(visited) == ctx.query.visiting_city_number


def complete_information(ctx: PlanContext, plan: Plan) -> Verdict:
  """Right day count and city count, every key present, required entries filled, <= 50% of 6 * days absent."""
  if not _valid_days(ctx, plan):
    return Verdict(False, "Invalid Days")
  if not _valid_visiting_city_number(ctx, plan):
    return Verdict(False, "Invalid City Number")
  total_valid = 0
  for i, unit in enumerate(_days(ctx, plan)):
    for key in ("transportation", "breakfast", "lunch", "dinner", "attraction", "accommodation"):
      if key not in unit:
        return Verdict(False, f"No {key.capitalize()} Info.")
    city = unit["current_city"]
    if ("from " in city or "to " in city) and unit["transportation"] in ("", "-"):
      return Verdict(False, f"No transportation in day {i + 1} is not allowed.")
    if ("from " not in city and " to " not in city) and unit["attraction"] in ("", "-"):
      return Verdict(False, f"No attaction in day {i + 1} is not allowed.")
    if i != ctx.query.days - 1 and unit["accommodation"] in ("", "-"):
      return Verdict(False, f"No accommodation in day {i + 1} is not allowed.")
    if any(unit[meal] in ("", "-") for meal in fields.MEALS) and "from " not in city:
      return Verdict(False, f"No meal in day {i + 1} is not allowed.")
    total_valid += sum(1 for key in unit if fields.is_filled(unit[key]))
  if total_valid / (6 * ctx.query.days) < 0.5:
    return Verdict(False, "The absent information is more than 50%.")
  return PASS


COMMONSENSE_CHECKS: Mapping[str, Callable[[PlanContext, Plan], Verdict]] = {
  "reasonable_city_route": reasonable_city_route,
  "diverse_restaurants": diverse_restaurants,
  "diverse_attractions": diverse_attractions,
  "minimum_nights_stay": minimum_nights_stay,
  "non_conflicting_transportation": non_conflicting_transportation,
  "within_current_city": within_current_city,
  "within_sandbox": within_sandbox,
  "complete_information": complete_information,
}


def guarded(check: Callable[[PlanContext, Plan], Verdict], ctx: PlanContext, plan: Plan) -> Verdict:
  """Runs a check; input on which the official code would raise fails the check instead (never raises)."""
  try:
    return check(ctx, plan)
  except Exception as exc:  # noqa: BLE001 - malformed model output must score 0, not crash the evaluator
    return Verdict(False, f"malformed plan: {type(exc).__name__}: {exc}")


def commonsense_verdicts(ctx: PlanContext, plan: Plan) -> dict[str, Verdict]:
  """All eight commonsense checks of one delivered plan."""
  return {name: guarded(check, ctx, plan) for name, check in COMMONSENSE_CHECKS.items()}
