"""The metric table (genenv_jax/reporting/metric_table.py): each metric declared once, and the modules that log,
summarise, report and compare read it instead of quoting tags, descriptions or plot titles."""

import pathlib
import re

from genenv_jax import compare
from genenv_jax.reporting import metric_table as mt
from genenv_jax.reporting import summary_report
from genenv_jax.training import log_tags, loop

PACKAGE = pathlib.Path(mt.__file__).parents[1]
# the modules that read the table (the step emits the metrics under these tags: coevolution/step.py)
READERS = ("training/log_tags.py", "training/loop.py", "reporting/summary_report.py", "compare.py")


def test_each_metric_is_declared_once():
  tags = [m.tag for m in mt.METRICS]
  assert len(tags) == len(set(tags))
  titles = [m.plot for m in mt.METRICS if m.plot]
  assert len(titles) == len(set(titles))


def test_the_readers_quote_no_tag_description_or_title():
  quoted = []
  texts = {m.tag for m in mt.METRICS} | {m.description for m in mt.METRICS} | {m.plot for m in mt.METRICS if m.plot}
  for name in READERS:
    source = (PACKAGE / name).read_text()
    quoted += [f"{name}: {s}" for s in re.findall(r'"([^"\n]+)"', source) if s in texts]
  assert quoted == []


def test_the_collections_are_the_tables():
  assert loop.SUMMARY_KEYS == mt.SUMMARY_KEYS and loop.PROGRESS_KEYS == mt.PROGRESS_KEYS
  assert summary_report.STEP_FIGURES == mt.PLOTS and summary_report.OLD_ROW_KEYS == mt.OLD_ROW_KEYS
  assert compare.TRAJECTORIES == mt.FRESH_PLOTS and set(compare.TRAJECTORIES) <= set(mt.PLOTS)
  assert log_tags.FRESH_TASKS == mt.tags("fresh_tasks") and all(
    log_tags.DESCRIPTIONS[m.tag] == m.description for m in mt.METRICS
  )
  assert mt.PROGRESS_KEYS == (mt.REWARD_MEAN, mt.P_HAT_MEAN, mt.BAND_FRAC, mt.DIFFICULTY_MEAN)
