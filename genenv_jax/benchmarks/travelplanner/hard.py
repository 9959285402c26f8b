"""TravelPlanner's five hard-constraint checks and the plan cost, as `evaluation/hard_constraint.py`
(OSU-NLP-Group/TravelPlanner) defines them; each returns a `Verdict`, with passed = None when the query sets no such
constraint (the budget always applies).

- budget (official valid_cost): total_cost(plan) <= budget;
- room_rule (valid_room_rule): no stay's house_rules contains "No <rule>" (smoking, parties, children under 10,
  visitors, pets);
- cuisine (valid_cuisine): every wanted cuisine is a substring of some visited restaurant's Cuisines;
- room_type (valid_room_type): each stay's room type is "Entire home/apt" (entire room), "Private room" (private
  room), "Shared room" (shared room), or anything but "Shared room" (not shared room);
- transportation (valid_transportation): no field contains "Flight" (no flight) / "Self-driving" (no self-driving),
  case-sensitive.
The sandbox row of a stay or meal is the first match of its "Name, City" (`travelplanner.database`).

total_cost, summed over the first min(days, len(plan)) days:
- flight: price of the first reference flight with that number x people;
- self-driving: the distance cost x ceil(people / 5) cars; taxi: x ceil(people / 4) cars;
- each meal: the restaurant's average cost x people;
- each accommodation entry (one night): price x ceil(people / maximum occupancy) rooms.
Entries that cannot be resolved add nothing (officially a missing self-driving/taxi cost would crash, but the hard
checks only run once Within Sandbox has passed, when every cost resolves).
Reproduced quirk: in the cuisine check, a meal in the origin city skips the rest of that day's meals (the official
loop `continue`s).
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from genenv_jax.benchmarks.travelplanner import fields
from genenv_jax.benchmarks.travelplanner.checks import PASS, Plan, PlanContext, Verdict, guarded
from genenv_jax.benchmarks.travelplanner.database import distance_cost, find_accommodations, find_restaurant

HOUSE_RULE_BANS: Mapping[str, str] = {
  "smoking": "No smoking",
  "parties": "No parties",
  "children under 10": "No children under 10",
  "visitors": "No visitors",
  "pets": "No pets",
}
NOT_APPLICABLE = Verdict(None)


def _days(ctx: PlanContext, plan: Plan) -> Plan:
  return plan[: min(ctx.query.days, len(plan))]


def _transport_cost(ctx: PlanContext, unit: Mapping[str, Any]) -> float:
  value = unit["transportation"]
  org, dest = fields.from_to(value)
  if org is None or dest is None:
    org, dest = fields.from_to(unit["current_city"])
  if org is None or dest is None:
    return 0.0
  people = ctx.query.people_number
  if "flight number" in value.lower():
    number = fields.flight_number(value)
    prices = [f.price for f in ctx.flights if f.number == number]
    return prices[0] * people if prices else 0.0
  if "self-driving" in value.lower() or "taxi" in value.lower():
    mode, per_car = ("self-driving", 5) if "self-driving" in value.lower() else ("taxi", 4)
    cost = distance_cost(ctx.database, fields.before_parenthesis(org), fields.before_parenthesis(dest), mode)
    return 0.0 if cost is None else cost * math.ceil(people / per_car)
  return 0.0


def total_cost(ctx: PlanContext, plan: Plan) -> float:
  """The plan's cost by the official `get_total_cost` rules (module docstring)."""
  people = ctx.query.people_number
  total = 0.0
  for unit in _days(ctx, plan):
    if fields.is_filled(unit["transportation"]):
      total += _transport_cost(ctx, unit)
    for meal in fields.MEALS:
      if fields.is_filled(unit[meal]):
        restaurant = find_restaurant(ctx.database, *fields.name_city(unit[meal]))
        if restaurant is not None:
          total += restaurant.average_cost * people
    if fields.is_filled(unit["accommodation"]):
      rows = find_accommodations(ctx.database, *fields.name_city(unit["accommodation"]))
      if rows:
        total += rows[0].price * math.ceil(people / rows[0].maximum_occupancy)
  return total


def budget(ctx: PlanContext, plan: Plan) -> Verdict:
  """total_cost <= budget."""
  cost = total_cost(ctx, plan)
  if cost <= ctx.query.budget:
    return PASS
  return Verdict(False, f"The total cost {cost:g} exceeds the budget {ctx.query.budget:g}.")


def room_rule(ctx: PlanContext, plan: Plan) -> Verdict:
  """No stay forbids what the query's house rule asks for."""
  rule = ctx.query.local_constraint["house rule"]
  if rule is None:
    return NOT_APPLICABLE
  for unit in _days(ctx, plan):
    if fields.is_filled(unit["accommodation"]):
      rows = find_accommodations(ctx.database, *fields.name_city(unit["accommodation"]))
      if rows and rule in HOUSE_RULE_BANS and HOUSE_RULE_BANS[rule] in rows[0].house_rules:
        return Verdict(False, f"The house rule should be {rule}.")
  return PASS


def cuisine(ctx: PlanContext, plan: Plan) -> Verdict:
  """Every wanted cuisine is served at some meal outside the origin city."""
  wanted = ctx.query.local_constraint["cuisine"]
  if not wanted:
    return NOT_APPLICABLE
  found: set[str] = set()
  for unit in _days(ctx, plan):
    for meal in fields.MEALS:
      if not fields.is_filled(unit[meal]):
        continue
      name, city = fields.name_city(unit[meal])
      if city == ctx.query.org:
        break  # official quirk: `continue` of the day loop skips this day's remaining meals
      restaurant = find_restaurant(ctx.database, name, city)
      if restaurant is not None:
        found.update(c for c in wanted if c in restaurant.cuisines)
  missing = [c for c in wanted if c not in found]
  return PASS if not missing else Verdict(False, f"The cuisine {missing[0]} is not satisfied.")


def room_type(ctx: PlanContext, plan: Plan) -> Verdict:
  """Every stay has the query's room type."""
  wanted = ctx.query.local_constraint["room type"]
  if wanted is None:
    return NOT_APPLICABLE
  for unit in _days(ctx, plan):
    if fields.is_filled(unit["accommodation"]):
      rows = find_accommodations(ctx.database, *fields.name_city(unit["accommodation"]))
      if not rows:
        continue
      actual = rows[0].room_type
      ok = {
        "not shared room": actual != "Shared room",
        "shared room": actual == "Shared room",
        "private room": actual == "Private room",
        "entire room": actual == "Entire home/apt",
      }.get(wanted, True)
      if not ok:
        return Verdict(False, f"The room type should be {wanted}.")
  return PASS


def transportation(ctx: PlanContext, plan: Plan) -> Verdict:
  """No day uses the transport the query rules out."""
  rule = ctx.query.local_constraint["transportation"]
  if rule is None:
    return NOT_APPLICABLE
  for unit in _days(ctx, plan):
    value = unit["transportation"]
    if fields.is_filled(value):
      if (rule == "no flight" and "Flight" in value) or (rule == "no self-driving" and "Self-driving" in value):
        return Verdict(False, f"The transportation should not be {rule}.")
  return PASS


HARD_CHECKS: Mapping[str, Callable[[PlanContext, Plan], Verdict]] = {
  "cuisine": cuisine,
  "room_rule": room_rule,
  "transportation": transportation,
  "room_type": room_type,
  "budget": budget,
}


def hard_verdicts(ctx: PlanContext, plan: Plan) -> dict[str, Verdict]:
  """All five hard checks of one plan (officially run only when Complete Information and Within Sandbox pass)."""
  return {name: guarded(check, ctx, plan) for name, check in HARD_CHECKS.items()}
