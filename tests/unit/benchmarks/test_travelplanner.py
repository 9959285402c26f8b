"""TravelPlanner sole planning on the 45 train queries: oracle / null agents, check perturbations, the plan parser,
and the transcribed constraint annotations checked against the query texts and the gold plans."""

from __future__ import annotations

import copy
import dataclasses
import json
import re

import pytest

from genenv_jax.benchmarks.travelplanner import fields
from genenv_jax.benchmarks.travelplanner.checks import PlanContext, commonsense_verdicts
from genenv_jax.benchmarks.travelplanner.database import find_accommodations, load_reference_infos
from genenv_jax.benchmarks.travelplanner.evaluator import TravelPlannerBenchmark, TravelPlannerGold, evaluate_plan
from genenv_jax.benchmarks.travelplanner.hard import hard_verdicts, total_cost
from genenv_jax.benchmarks.travelplanner.plan import parse_plan, plan_to_text
from genenv_jax.benchmarks.travelplanner.query import load_train_queries, query_from_json
from genenv_jax.tasks.benchmark import EvalItem

BENCH = TravelPlannerBenchmark()


@pytest.fixture(scope="module")
def items(shared_data):
  return BENCH.load_items(str(shared_data))


def _plan(item: EvalItem) -> list[dict]:
  return copy.deepcopy([dict(day) for day in item.gold.plan])


def _with_query(item: EvalItem, **changes) -> PlanContext:
  ctx = item.gold.context
  return dataclasses.replace(ctx, query=dataclasses.replace(ctx.query, **changes))


def _with_local(item: EvalItem, **local) -> PlanContext:
  merged = {**item.gold.query.local_constraint, **{k.replace("_", " "): v for k, v in local.items()}}
  return _with_query(item, local_constraint=merged)


def _score(item: EvalItem, plan) -> dict:
  return BENCH.score(item, plan_to_text(plan)).detail


# ---------------------------------------------------------------------------------------------------- agents


def test_items_and_prompt(items):
  assert len(items) == 45 and items[44].id == "travelplanner-train-44" and {it.split for it in items} == {"train"}
  system, user = items[0].messages
  assert system["role"] == "system" and "proficient planner" in system["content"] and "```json" in system["content"]
  assert user["content"].startswith("Given Information:") and "Query:" in user["content"]
  assert "F3573659" in user["content"]  # the reference flights are in the prompt


def test_oracle_passes_every_check(items):
  results = [BENCH.score(it, BENCH.oracle_output(it)) for it in items]
  for r in results:
    assert r.correct and r.score == 1.0, (r.id, r.detail["failures"])
    assert all(r.detail["commonsense"].values())
    assert all(v is not False for v in r.detail["hard"].values())
  metrics = BENCH.aggregate(results)
  for key in (
    "delivery_rate",
    "commonsense_micro",
    "commonsense_macro",
    "hard_micro",
    "hard_macro",
    "final_pass_rate",
    "paper_score",
    "train/final_pass_rate",
  ):
    assert metrics[key] == 1.0, key
  # eval.py's train denominators: 8 * 45 = 360 commonsense checks and 105 applicable hard checks
  assert sum(sum(r.detail["commonsense"].values()) for r in results) == 360
  assert sum(r.detail["hard_applicable"] for r in results) == 105
  assert all(
    r.detail["hard_applicable"] == it.gold.query.applicable_hard_constraints() for r, it in zip(results, items)
  )


@pytest.mark.parametrize(
  "output",
  [
    "",
    "I cannot plan this trip.",
    "[]",
    "```json\n{\"days\": 1}\n```",
    "[1, 2]",
    "[{\"days\": 1, \"current_city\": ",
    None,
  ],
)
def test_null_and_unparseable_outputs_are_not_delivered(items, output):
  results = [BENCH.score(it, output) for it in items[:5]]
  assert all(not r.detail["delivered"] and r.score == 0.0 and not r.correct for r in results)
  metrics = BENCH.aggregate(results)
  assert metrics["delivery_rate"] == 0.0 and metrics["paper_score"] == 0.0 and metrics["final_pass_rate"] == 0.0


@pytest.mark.parametrize(
  "plan",
  [
    [{}],
    [{"days": 1}],
    [{"days": None, "current_city": 7, "transportation": ["x"]}],
    [
      {
        "current_city": "from St. Petersburg",
        "transportation": "Flight Number: ",
        "breakfast": None,
        "attraction": 3,
        "lunch": "-",
        "dinner": "x",
        "accommodation": {},
      }
    ]
    * 3,
  ],
)
def test_malformed_plans_score_zero_without_raising(items, plan):
  result = BENCH.score(items[0], json.dumps(plan))
  assert result.detail["delivered"] and not result.correct
  assert result.detail["hard"] is None and result.score < 1.0


def test_aggregate_rejects_foreign_results(items):
  with pytest.raises(ValueError, match="lacks TravelPlanner details"):
    BENCH.aggregate([dataclasses.replace(BENCH.score(items[0], ""), detail={})])


def test_unscorable_splits_say_why(shared_data):
  assert tuple(BENCH.splits()) == ("train",)
  with pytest.raises(ValueError, match="reference information"):
    BENCH.load_items(str(shared_data), split="validation")
  with pytest.raises(ValueError, match="no split 'dev'"):
    BENCH.load_items(str(shared_data), split="dev")
  assert len(BENCH.load_items(str(shared_data), limit=2)) == 2


# ---------------------------------------------------------------------------------------------------- parser


def test_parse_plan_formats(items):
  plan = _plan(items[0])
  assert parse_plan(plan_to_text(plan)) == plan
  assert parse_plan("Here is the plan:\n" + json.dumps(plan) + "\nEnjoy [your] trip!") == plan
  assert parse_plan("See [1]. " + json.dumps({"plan": plan})) == plan
  assert parse_plan("Travel Plan: " + repr(plan)) == plan  # the gold plans' Python-literal form
  assert parse_plan("```\n[not json]\n```\n```json\n" + json.dumps(plan) + "\n```") == plan
  assert parse_plan("[[[[[[" * 2000) is None


# ---------------------------------------------------------------------------------------------------- perturbations


def test_budget_flips_with_budget_annotation(items):
  item = items[0]
  cost = total_cost(item.gold.context, item.gold.plan)
  assert hard_verdicts(_with_query(item, budget=cost), item.gold.plan)["budget"].passed
  assert hard_verdicts(_with_query(item, budget=cost - 1), item.gold.plan)["budget"].passed is False


def test_expensive_restaurant_breaks_budget(items):
  item = items[14]  # cost 5696 against a budget of 5700
  plan = _plan(item)
  name, city = fields.name_city(plan[1]["lunch"])
  used = {plan[d][m] for d in range(len(plan)) for m in fields.MEALS}
  pricey = max(
    (r for r in item.gold.context.database.restaurants[city] if f"{r.name}, " not in " ".join(used)),
    key=lambda r: r.average_cost,
  )
  plan[1]["lunch"] = plan[1]["lunch"].replace(name, pricey.name)
  detail = _score(item, plan)
  assert detail["commonsense_pass"] and detail["hard"]["budget"] is False and not detail["hard_pass"]


def test_repeated_restaurant_and_attraction(items):
  plan = _plan(items[0])
  plan[1]["dinner"] = plan[1]["lunch"]
  assert _score(items[0], plan)["commonsense"]["diverse_restaurants"] is False
  plan = _plan(items[0])
  plan[2]["attraction"] += plan[1]["attraction"].split(";")[0] + ";"
  detail = _score(items[0], plan)
  assert detail["commonsense"]["diverse_attractions"] is False and detail["commonsense"]["within_sandbox"]


def test_unknown_city_or_name_leaves_the_sandbox(items):
  for field, value in (
    ("breakfast", "Dial A Cake, Atlantis"),
    ("lunch", "No Such Diner, Rockford"),
    ("attraction", "Burpee Museum of Natural History, Atlantis;"),
    ("accommodation", "Nowhere Inn, Rockford"),
  ):
    plan = _plan(items[0])
    plan[1][field] = value
    detail = _score(items[0], plan)
    assert detail["commonsense"]["within_sandbox"] is False, field
    assert detail["hard"] is None and not detail["hard_pass"]  # hard checks run only inside the sandbox
  plan = _plan(items[0])
  plan[0]["transportation"] = plan[0]["transportation"].replace("F3573659", "F0000000")
  assert _score(items[0], plan)["commonsense"]["within_sandbox"] is False


def test_wrong_number_of_days_is_incomplete(items):
  detail = _score(items[0], _plan(items[0])[:2])
  assert detail["commonsense"]["complete_information"] is False and detail["hard"] is None
  plan = _plan(items[0])
  plan[1]["lunch"] = "-"
  assert _score(items[0], plan)["commonsense"]["complete_information"] is False


def test_city_route_current_city_and_transport_conflicts(items):
  plan = _plan(items[0])
  plan[2]["current_city"] = "from Rockford to Denver"
  assert _score(items[0], plan)["commonsense"]["reasonable_city_route"] is False
  plan = _plan(items[0])
  denver = items[0].gold.context.database.restaurants["Denver"][0]
  plan[0]["dinner"] = f"{denver.name}, Denver"  # a real restaurant, in neither city of the travel day
  detail = _score(items[0], plan)
  assert detail["commonsense"]["within_current_city"] is False and detail["commonsense"]["within_sandbox"]
  plan = _plan(items[1])  # self-driving there and back
  plan[2]["transportation"] = "Taxi, from Pensacola to Kansas City, duration: 1, distance: 1, cost: 1"
  assert _score(items[1], plan)["commonsense"]["non_conflicting_transportation"] is False


def test_minimum_nights_stay(items):
  item = items[0]  # Rockford stay needs 2 nights: cut it to 1
  rows = find_accommodations(item.gold.context.database, *fields.name_city(item.gold.plan[0]["accommodation"]))
  assert len(rows) == 1 and rows[0].minimum_nights == 2.0
  plan = _plan(item)
  plan[1]["accommodation"] = "Private Room in a two bedroom apt., Rockford"
  assert commonsense_verdicts(item.gold.context, plan)["minimum_nights_stay"].passed is False


def test_hard_local_constraints_flip(items):
  item = items[0]
  house_rules = find_accommodations(item.gold.context.database, *fields.name_city(item.gold.plan[0]["accommodation"]))[
    0
  ].house_rules
  banned = next(
    rule for rule in ("smoking", "parties", "children under 10", "visitors", "pets") if f"No {rule}" in house_rules
  )
  plan = item.gold.plan
  assert hard_verdicts(_with_local(item, house_rule=banned), plan)["room_rule"].passed is False
  assert hard_verdicts(_with_local(item, room_type="shared room"), plan)["room_type"].passed is False
  assert hard_verdicts(_with_local(item, cuisine=("Klingon",)), plan)["cuisine"].passed is False
  assert hard_verdicts(_with_local(item, transportation="no flight"), plan)["transportation"].passed is False
  assert hard_verdicts(_with_local(item, transportation="no self-driving"), plan)["transportation"].passed
  verdicts = hard_verdicts(item.gold.context, plan)
  assert [verdicts[k].passed for k in ("room_rule", "room_type", "cuisine", "transportation")] == [None] * 4


def test_partial_credit_score(items):
  item = items[30]  # 3 local constraints: 8 + 4 applicable checks
  plan = _plan(item)
  plan[1]["dinner"] = plan[1]["lunch"]  # diverse restaurants fails; the hard checks still run
  result = BENCH.score(item, plan_to_text(plan))
  assert result.detail["hard_applicable"] == 4 and not result.correct
  passed = sum(result.detail["commonsense"].values()) + sum(v is True for v in result.detail["hard"].values())
  assert result.score == pytest.approx(passed / 12)


# ---------------------------------------------------------------------------------------------------- annotations

_WORDS = {1: "one", 2: "two", 3: "three", 4: "four", 5: "five", 6: "six", 7: "seven", 8: "eight"}
_CUISINES = ("American", "Chinese", "French", "Indian", "Italian", "Mediterranean", "Mexican")
_HOUSE_WORDS = {
  "smoking": r"\bsmoking",
  "parties": r"\bparties",
  "children under 10": r"\bchildren under",
  "visitors": r"\bvisitors",
  "pets": r"\bpets?\b",
}
_ROOM_WORDS = {"entire room": "entire room", "private room": "private room"}
_TRANSPORT_WORDS = {"no flight": r"flight|flying", "no self-driving": r"self-driv|drive ourselves"}
_SOLO = r"single person|single-person|solo|alone|one person|1 person"


def _query_text(item: EvalItem) -> str:
  content = item.messages[1]["content"]
  return content[content.rindex("Query:") + len("Query:") :].strip()


def _people_pattern(n: int) -> str:
  if n == 1:
    return _SOLO
  w = _WORDS[n]
  return rf"\b(?:{n}|{w}) (?:people|individuals)\b|group of (?:{n}|{w})\b|party of {n}\b|for {w}\b|" + (
    r"\bpair\b" if n == 2 else "$^"
  )


def test_annotation_file_matches_query_texts(items):
  queries = load_train_queries()
  assert len(queries) == 45
  for item, q in zip(items, queries):
    text, where = _query_text(item), item.id
    assert f"${int(q.budget):,}" in text, where
    assert q.org in text and q.dest in text, where
    stated = {int(m) for m in re.findall(r"\b(\d)[- ]days?\b", text)}
    stated |= {n for n, w in _WORDS.items() if f"{w} days" in text} | ({7} if "week" in text else set())
    assert stated <= {q.days}, where  # the day count, where stated (query 33 gives only the dates)
    start, end = int(q.date[0][-2:]), int(q.date[-1][-2:])
    assert q.date[0].startswith("2022-03-") and "March" in text and "2022" in text, where
    assert re.search(rf"\b{start}(?:st|nd|rd|th)\b", text) and re.search(rf"\b{end}(?:st|nd|rd|th)\b", text), where
    assert end - start + 1 == q.days, where
    if re.search(_people_pattern(q.people_number), text) is None:  # queries 8 and 14 leave an easy solo trip implicit
      assert (
        q.people_number == 1 and q.level == "easy" and item.id in ("travelplanner-train-8", "travelplanner-train-14")
      ), where
    local = q.local_constraint
    assert q.level == {0: "easy", 1: "medium", 3: "hard"}[sum(v is not None for v in local.values())], where
    assert {c for c in _CUISINES if c in text} == set(local["cuisine"] or ()), where
    for key, words in (("house rule", _HOUSE_WORDS), ("room type", _ROOM_WORDS)):
      mentioned = {value for value, word in words.items() if re.search(word, text.lower())}
      assert mentioned == ({local[key]} if local[key] else set()), (where, key, mentioned)
    mentioned = {value for value, pattern in _TRANSPORT_WORDS.items() if re.search(pattern, text.lower())}
    assert mentioned == ({local["transportation"]} if local["transportation"] else set()), where


def test_annotation_file_matches_gold_plans(items, shared_data):
  references = load_reference_infos(str(shared_data))
  for item, reference in zip(items, references):
    gold: TravelPlannerGold = item.gold
    q, plan, where = gold.query, gold.plan, item.id
    assert len(plan) == q.days == len(q.date), where
    assert q.visiting_city_number == {3: 1, 5: 2, 7: 3}[q.days], where
    first_from, _ = fields.from_to(plan[0]["current_city"])
    _, last_to = fields.from_to(plan[-1]["current_city"])
    assert fields.before_parenthesis(first_from) == q.org == fields.before_parenthesis(last_to), where
    visited = set()
    for day in plan:
      a, b = fields.from_to(day["current_city"]) if "from" in day["current_city"] else (day["current_city"], None)
      visited |= {fields.before_parenthesis(c) for c in (a, b) if c}
    visited.discard(q.org)
    assert len(visited) == q.visiting_city_number, where
    states = gold.context.database.city_states
    assert (visited == {q.dest}) if q.days == 3 else all(states[c] == q.dest for c in visited), where
    # every gold flight flies on that day's date; the reference searches cover exactly the trip's first/last dates
    for i, day in enumerate(plan):
      if "Flight Number: " in day["transportation"]:
        number = fields.flight_number(day["transportation"])
        assert any(f.number == number and f.date == q.date[i] for f in gold.context.flights), (where, i)
    flight_dates = sorted(k.rsplit(" on ", 1)[1] for k in reference if k.startswith("Flight from"))
    assert flight_dates[0] == q.date[0] and flight_dates[-1] == q.date[-1], where
    assert set(flight_dates) <= set(q.date), where
    # the budget covers the gold plan, and one more traveller would break it (except the generous query 17)
    assert total_cost(gold.context, plan) <= q.budget, where
    heavier = _with_query(item, people_number=q.people_number + 1)
    assert (total_cost(heavier, plan) > q.budget) != (item.id == "travelplanner-train-17"), where
    assert all(v.passed is not False for v in hard_verdicts(gold.context, plan).values()), where
    assert evaluate_plan(gold.context, list(plan))["hard_pass"], where


def test_annotation_validation_names_the_bad_field():
  record = json.loads(json.dumps(dataclasses.asdict(load_train_queries()[0])))
  record["local_constraint"]["house rule"] = "karaoke"
  with pytest.raises(ValueError, match="bad house rule 'karaoke'"):
    query_from_json(record, "entry 0")
  record = {**record, "date": ["2022-03-16"]}
  with pytest.raises(ValueError, match="'date' must list 3 dates"):
    query_from_json(record, "entry 0")
