"""How TravelPlanner's evaluator reads the text fields of a plan day (TravelPlanner `utils/func.py`,
`evaluation/commonsense_constraint.py`). The rules, reproduced exactly:

- `before_parenthesis(s)`: the text before a first "(...)" group (regex `^(.*?)\\([^)]*\\)`), else s unchanged and
  unstripped: "Dallas(Texas)" -> "Dallas".
- `from_to(text)`: "A" and "B" of the first "from A to B" (regex `from\\s+(.+?)\\s+to\\s+([^,]+)(?=[,\\s]|$)`,
  B ends at a comma), else (None, None).
- `name_city(entry)`: "Name, City" split at the last comma (regex `(.*?),\\s*([^,]+)(\\(\\w[\\w\\s]*\\))?$`), the city
  taken before any parenthesis and both stripped; ("-", "-") when there is no comma.
- `transport_kind(text)`: "Taxi" if "taxi" occurs (case-insensitive), else "Self-driving" if "self-driving", else
  "Flight" if "flight", else None.
- `attraction_entries(value)`: `value.split(';')[:-1]`, so every attraction must end with ';' (an unterminated last
  one is ignored, as in the official checks).
- `is_filled(value)`: the value is truthy and not '-'.
"""

from __future__ import annotations

import re
from typing import Any

_BEFORE_PARENTHESIS = re.compile(r"^(.*?)\([^)]*\)")
_FROM_TO = re.compile(r"from\s+(.+?)\s+to\s+([^,]+)(?=[,\s]|$)")
_NAME_CITY = re.compile(r"(.*?),\s*([^,]+)(\(\w[\w\s]*\))?$")

NO_MORE_DAYS = "You don't need to fill in the information for this or later days."
MEALS = ("breakfast", "lunch", "dinner")


def before_parenthesis(text: str) -> str:
  """Official `extract_before_parenthesis`; raises TypeError on a non-string (callers treat that as a failure)."""
  match = _BEFORE_PARENTHESIS.search(text)
  return match.group(1) if match else text


def from_to(text: str) -> tuple[str | None, str | None]:
  """Official `extract_from_to`: ("A", "B") of "from A to B", else (None, None)."""
  match = _FROM_TO.search(text)
  return (match.group(1), match.group(2)) if match else (None, None)


def name_city(entry: str) -> tuple[str, str]:
  """Official `get_valid_name_city`: ("Name", "City") of "Name, City(State)", or ("-", "-") when unparseable."""
  match = _NAME_CITY.search(entry)
  if not match:
    return "-", "-"
  return match.group(1).strip(), before_parenthesis(match.group(2).strip()).strip()


def transport_kind(text: str) -> str | None:
  """Official `transportation_match`: the kind of transport a transportation field names."""
  lowered = text.lower()
  if "taxi" in lowered:
    return "Taxi"
  if "self-driving" in lowered:
    return "Self-driving"
  if "flight" in lowered:
    return "Flight"
  return None


def attraction_entries(value: str) -> list[str]:
  """Official attraction split: `value.split(';')[:-1]`."""
  return value.split(";")[:-1]


def is_filled(value: Any) -> bool:
  """A field carries information: truthy and not '-'."""
  return bool(value) and value != "-"


def flight_number(transportation: str) -> str:
  """The flight number in "Flight Number: F123, ..." (official `value.split('Flight Number: ')[1].split(',')[0]`);
  raises IndexError when the exact prefix is absent (callers treat that as a failure)."""
  return transportation.split("Flight Number: ")[1].split(",")[0]
