"""The TravelPlanner sandbox database (Xie et al., 2024, "TravelPlanner"), read-only, as its evaluator sees it.

Files, under `<data_dir>/travelplanner/database/` (OSU-NLP-Group/TravelPlanner @ 958f30d7):
`restaurants/clean_restaurant_2022.csv`, `attractions/attractions.csv`,
`accommodations/clean_accommodations_2022.csv`, `googleDistanceMatrix/distance.csv`,
`background/citySet_with_states.txt`. The flights table was never public; flights come from each train query's
reference information (`train_ref_info.jsonl`, keys "Flight from A to B on DATE").

Rules reproduced from the official tools (`tools/*/apis.py`, `evaluation/*.py`):
- each table is loaded with pandas `read_csv(...).dropna()`: a row with any empty cell is not in the sandbox (710
  accommodations without house rules among them); row order is file order, and lookups take the first match;
- a named entity "Name, City" matches rows of exactly that city whose name contains Name as a substring
  (`Name.str.contains(re.escape(name))`, case-sensitive);
- distance costs (`GoogleDistanceMatrix.run_for_evaluation`): first row with that origin and destination; no cost when
  its duration or distance is missing or the duration contains "day"; otherwise with d the distance in km,
  self-driving costs int(d * 0.05) per car and taxi int(d) per car.
"""

from __future__ import annotations

import csv
import dataclasses
import json
import pathlib
from typing import Any, Mapping, Sequence

DATABASE_DIR = ("travelplanner", "database")
RESTAURANTS_CSV = ("restaurants", "clean_restaurant_2022.csv")
ATTRACTIONS_CSV = ("attractions", "attractions.csv")
ACCOMMODATIONS_CSV = ("accommodations", "clean_accommodations_2022.csv")
DISTANCES_CSV = ("googleDistanceMatrix", "distance.csv")
CITY_STATES_TXT = ("background", "citySet_with_states.txt")


@dataclasses.dataclass(frozen=True)
class Restaurant:
  name: str
  city: str
  cuisines: str
  average_cost: float


@dataclasses.dataclass(frozen=True)
class Attraction:
  name: str
  city: str


@dataclasses.dataclass(frozen=True)
class Accommodation:
  name: str
  city: str
  room_type: str
  price: float
  minimum_nights: float
  maximum_occupancy: float
  house_rules: str


@dataclasses.dataclass(frozen=True)
class Flight:
  number: str
  price: float
  origin: str
  destination: str
  date: str
  departure_time: str
  arrival_time: str


@dataclasses.dataclass(frozen=True)
class Database:
  """The sandbox tables, each grouped by city in file order; `distances[(origin, dest)] = (duration, distance)`."""

  restaurants: Mapping[str, tuple[Restaurant, ...]]
  attractions: Mapping[str, tuple[Attraction, ...]]
  accommodations: Mapping[str, tuple[Accommodation, ...]]
  distances: Mapping[tuple[str, str], tuple[str, str]]
  city_states: Mapping[str, str]


def _read_complete_rows(path: pathlib.Path) -> list[dict[str, str]]:
  """CSV rows as dicts, keeping only rows with no empty cell (pandas `dropna()`; these files use '' for missing)."""
  if not path.is_file():
    raise FileNotFoundError(f"TravelPlanner database file not found: {path}")
  with path.open(newline="", encoding="utf-8") as f:
    rows = list(csv.DictReader(f))
  return [row for row in rows if all(value is not None and value.strip() != "" for value in row.values())]


def _group_by_city(records: Sequence[Any]) -> dict[str, tuple[Any, ...]]:
  grouped: dict[str, list[Any]] = {}
  for record in records:
    grouped.setdefault(record.city, []).append(record)
  return {city: tuple(rows) for city, rows in grouped.items()}


def load_database(data_dir: str | pathlib.Path) -> Database:
  """Reads the sandbox tables from `<data_dir>/travelplanner/database/`."""
  root = pathlib.Path(data_dir).joinpath(*DATABASE_DIR)
  restaurants = [
    Restaurant(r["Name"], r["City"], r["Cuisines"], float(r["Average Cost"]))
    for r in _read_complete_rows(root.joinpath(*RESTAURANTS_CSV))
  ]
  attractions = [Attraction(r["Name"], r["City"]) for r in _read_complete_rows(root.joinpath(*ATTRACTIONS_CSV))]
  accommodations = [
    Accommodation(
      r["NAME"],
      r["city"],
      r["room type"],
      float(r["price"]),
      float(r["minimum nights"]),
      float(r["maximum occupancy"]),
      r["house_rules"],
    )
    for r in _read_complete_rows(root.joinpath(*ACCOMMODATIONS_CSV))
  ]
  distances_path = root.joinpath(*DISTANCES_CSV)
  if not distances_path.is_file():
    raise FileNotFoundError(f"TravelPlanner database file not found: {distances_path}")
  distances: dict[tuple[str, str], tuple[str, str]] = {}
  with distances_path.open(newline="", encoding="utf-8") as f:
    for row in csv.DictReader(f):  # no dropna here: the official tool keeps rows whose `cost` column is empty
      distances.setdefault((row["origin"], row["destination"]), (row["duration"], row["distance"]))
  city_path = root.joinpath(*CITY_STATES_TXT)
  if not city_path.is_file():
    raise FileNotFoundError(f"TravelPlanner database file not found: {city_path}")
  city_states = dict(line.split("\t", 1) for line in city_path.read_text(encoding="utf-8").splitlines() if "\t" in line)
  return Database(
    _group_by_city(restaurants), _group_by_city(attractions), _group_by_city(accommodations), distances, city_states
  )


def _matching(rows_by_city: Mapping[str, tuple[Any, ...]], name: str, city: str) -> tuple[Any, ...]:
  return tuple(row for row in rows_by_city.get(city, ()) if name in row.name)


def find_restaurant(db: Database, name: str, city: str) -> Restaurant | None:
  """First restaurant in `city` whose name contains `name` (official sandbox lookup), else None."""
  rows = _matching(db.restaurants, name, city)
  return rows[0] if rows else None


def find_attraction(db: Database, name: str, city: str) -> Attraction | None:
  """First attraction in `city` whose name contains `name`, else None."""
  rows = _matching(db.attractions, name, city)
  return rows[0] if rows else None


def find_accommodations(db: Database, name: str, city: str) -> tuple[Accommodation, ...]:
  """All accommodations in `city` whose name contains `name` (the minimum-nights rule needs the match count)."""
  return _matching(db.accommodations, name, city)


def distance_cost(db: Database, origin: str, destination: str, mode: str) -> int | None:
  """Per-car cost of `mode` ("self-driving" or "taxi") from origin to destination, or None when not available."""
  entry = db.distances.get((origin, destination))
  if entry is None:
    return None
  duration, distance = entry
  if not duration.strip() or not distance.strip() or "day" in duration:
    return None
  try:
    km = float(distance.replace("km", "").replace(",", ""))
  except ValueError:
    return None
  if "driving" in mode:
    return int(km * 0.05)
  if mode == "taxi":
    return int(km)
  return None


def flights_from_reference(reference_info: Mapping[str, Any]) -> tuple[Flight, ...]:
  """The flights listed in one query's reference information (entries "Flight from A to B on DATE"), in order."""
  flights = []
  for key, value in reference_info.items():
    if not key.startswith("Flight from") or not isinstance(value, list):
      continue  # "There is no flight from A to B on DATE." is a string
    for row in value:
      flights.append(
        Flight(
          str(row["Flight Number"]),
          float(row["Price"]),
          str(row["OriginCityName"]),
          str(row["DestCityName"]),
          str(row["FlightDate"]),
          str(row["DepTime"]),
          str(row["ArrTime"]),
        )
      )
  return tuple(flights)


def load_reference_infos(data_dir: str | pathlib.Path) -> list[dict[str, Any]]:
  """The 45 train queries' reference information, `<data_dir>/travelplanner/database/train_ref_info.jsonl`."""
  path = pathlib.Path(data_dir).joinpath(*DATABASE_DIR, "train_ref_info.jsonl")
  if not path.is_file():
    raise FileNotFoundError(f"TravelPlanner train reference information not found: {path}")
  return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
