"""plan's figures as text: the compiled program's memory, kernels and collectives, and the analytic phases."""

from __future__ import annotations


def analytic_figures(analysis, chip) -> dict:
  """The JSON form of a analytic.Analysis."""
  phases = []
  for t in analysis.phases:
    phases.append(
      {
        "name": t.cost.name,
        "kind": t.cost.kind,
        "model_flops": t.cost.model_flops,
        "flops": t.cost.flops,
        "hbm_bytes": t.cost.hbm_bytes,
        "compute_s": t.compute_s,
        "hbm_s": t.hbm_s,
        "ici_s": t.ici_s,
        "serial_s": t.serial_s,
        "overlapped_s": t.overlapped_s,
        "bound": t.bound,
        "mfu_serial": t.mfu_serial,
        "mfu_overlapped": t.mfu_overlapped,
        "hbm_utilisation": t.hbm_utilisation,
        "recompute_overhead": t.recompute_overhead,
        "recompute": dict(t.cost.recompute),
        "collectives": [
          {"name": c.name, "bytes": c.bytes, "count": c.count, "seconds": c.bytes / chip.ici_bandwidth}
          for c in t.cost.collectives
        ],
      }
    )
  return {
    "phases": phases,
    "training": analysis.training,
    "sampling": analysis.sampling,
    "step_serial_s": analysis.step_serial_s,
    "step_overlapped_s": analysis.step_overlapped_s,
    "memory": analysis.memory,
    "peak_phase": analysis.peak_phase,
    "peak_bytes": analysis.peak_bytes,
  }


def _pct(x: float) -> str:
  return f"{100 * x:.1f}%"


def collective_lines(collectives: dict, unknown_loops: int) -> list[str]:
  """The compiled program's collectives by kind beside the analytic model's (bytes received per device per step)."""
  from genenv_jax.planning.costs import fmt_bytes as fb

  if not collectives:
    return []
  lines = [
    "collectives per device per step (optimised HLO, loops unrolled; 'as role': collective matmuls' permutes counted "
    "as the all-gather or reduce-scatter they move | analytic model):"
  ]
  for kind, c in collectives.items():
    if c["ops"] or c["analytic_count"]:
      lines.append(
        f"  {kind:<18} {c['ops']:5d} ops, {c['executions']:7d} runs, {fb(c['bytes']):>10}, as role "
        f"{fb(c['role_bytes']):>10} | "
        f"{c['analytic_count']:7d} runs, {fb(c['analytic_bytes']):>10}"
      )
  if unknown_loops:
    lines.append(f"  ({unknown_loops} while loops with no readable trip count were counted once)")
  return lines


def compiled_lines(r: dict) -> list[str]:
  """The compiled program's part of the report: target and times, memory, FLOPs, collectives."""
  from genenv_jax.planning.costs import fmt_bytes as fb

  m, f = r["memory"], r["flops"]
  extra = r.get("extrapolated_from_layers")
  lines = [
    f"compiled for {r.get('target', '?')}: "
    + ", ".join(f"{k} {v:.1f} s" for k, v in r["compile_s"].items())
    + f"; {r.get('mosaic_kernels', 0)} Mosaic kernels",
    "memory per device (XLA memory_analysis"
    + (f", extrapolated to {r['layers']} layers from compiles with {extra[0]} and {extra[1]}):" if extra else "):"),
    f"  arguments      {fb(m['arguments'])}",
    f"  outputs        {fb(m['outputs'])}",
    f"  temporaries    {fb(m['temporaries'])}",
    f"  generated code {fb(m['generated_code'])}",
    f"  alias/donated  -{fb(m['alias'])}",
    (
      f"  peak estimate  {fb(m['peak'])} (args + outputs + temps + code - alias; XLA's own peak "
      f"{fb(m['xla_peak'])}) of {fb(r['hbm'])} HBM ({100 * r['utilisation']:.0f}%)"
    ),
    "  state by component: " + ", ".join(f"{k} {fb(v)}" for k, v in r["components"].items()),
    (
      f"FLOPs per device: XLA cost_analysis {f['xla_per_device_loops_once']:.3e} (loops counted once; analytic "
      f"count of that same program {f['analytic_per_device_loops_once']:.3e}); analytic full step "
      f"{f['analytic_per_device_step']:.3e}"
    ),
  ]
  lines += collective_lines(r.get("collectives", {}), r.get("unknown_loops", 0))
  lines += [
    f"    {s['kind']} at {s['source']}: {s['runs']} runs, {fb(s['bytes'])}" for s in r.get("collective_sources", [])
  ]
  return lines


def format_report(r: dict, advice) -> str:
  from genenv_jax.planning.costs import fmt_bytes as fb

  c, m, an = r["config"], r["memory"], r["analytic"]
  lens = c["lengths"]
  lines = [
    (
      f"plan: {c['devices']} x {c['chip']}"
      + (f" ({c['slice']})" if c.get("slice") else "")
      + f", mesh {c['mesh']}, agent {c['agent_params'] / 1e9:.2f}B + env {c['env_params'] / 1e9:.2f}B parameters, "
      f"{r['layers']} layers, attention {c['attention']}, remat agent {c['remat']['agent']} / env "
      f"{c['remat']['env']}"
    ),
    (
      f"shapes: agent {c['rows']['agent rows']} rows x ({lens['agent_prompt_len']} prompt + {lens['agent_answer_len']} "
      f"response) in {c['minibatches']} mini-batches; env {c['rows']['env rows']} rows x ({lens['env_prompt_len']} "
      f"prompt + {lens['env_output_len']} output); log-prob chunk {c['logprob_chunk']}, prefill rows "
      f"{c['prefill_rows']} (0 = all), KV cache {c.get('kv_cache', 'auto')}"
    ),
  ]
  if r["compiled"]:
    lines += compiled_lines(r)
  else:
    lines.append("not compiled (--nocompile): the fit below is judged on the analytic memory estimate")
  mem = an["memory"]
  lines.append("analytic memory per device (estimate; planning.analytic):")
  lines.append(
    "  state: " + ", ".join(f"{k} {fb(v)}" for k, v in mem["state"].items()) + f" = {fb(sum(mem['state'].values()))}"
  )
  for phase, parts in mem.items():
    if phase != "state":
      mark = "  <- peak" if phase == an["peak_phase"] else ""
      lines.append(
        f"  {phase}: " + ", ".join(f"{k} {fb(v)}" for k, v in parts.items()) + f" = {fb(sum(parts.values()))}{mark}"
      )
  lines.append(f"  analytic peak: state + {an['peak_phase']} = {fb(an['peak_bytes'])}")
  lines.append(f"analytic time on {c['chip']} (per phase: compute | HBM | ICI -> serial, overlapped):")
  for p in an["phases"]:
    lines.append(
      f"  {p['name']:<14} {p['compute_s']:8.2f} s | {p['hbm_s']:7.2f} s | {p['ici_s']:6.2f} s -> "
      f"{p['serial_s']:8.2f} s, {p['overlapped_s']:8.2f} s  {p['bound']}-bound"
      + (
        f", MFU {_pct(p['mfu_serial'])} / {_pct(p['mfu_overlapped'])}, recompute +{_pct(p['recompute_overhead'])}"
        if p["kind"] == "train"
        else f", HBM bandwidth {_pct(p['hbm_utilisation'])}"
      )
    )
    for col in p["collectives"]:
      lines.append(f"      ICI {col['name']}: {col['count']} x, {fb(col['bytes'])} per chip, {col['seconds']:.3f} s")
    for name, extra_flops in p["recompute"].items():
      if extra_flops:
        lines.append(f"      extra FLOPs {name}: {extra_flops:.3e}")
  t, s = an["training"], an["sampling"]
  lines += [
    (
      f"training (agent + env updates): {t['serial_s']:.1f} s serial / {t['overlapped_s']:.1f} s overlapped; MFU "
      f"{_pct(t['mfu_serial'])} serial, {_pct(t['mfu_overlapped'])} overlapped (an UPPER BOUND; target >= 40%); "
      f"recompute overhead +{_pct(t['recompute_overhead'])} hardware FLOPs"
    ),
    (
      f"sampling (prefill + decode): {s['serial_s']:.1f} s serial / {s['overlapped_s']:.1f} s overlapped; "
      f"HBM-bandwidth "
      f"utilisation {_pct(s['hbm_utilisation'])} (decode is bandwidth-bound: weights + KV cache every step)"
    ),
    f"step (analytic): {an['step_serial_s']:.1f} s serial, {an['step_overlapped_s']:.1f} s overlapped",
  ]
  lines += [f"warning: {w}" for w in r["warnings"]]
  peak = m["peak"]
  how = "" if r["compiled"] else " (analytic)"
  if r["fits"]:
    lines.append(
      f"FITS{how}: peak {fb(peak)} <= {fb(r['usable'])} usable of {fb(r['hbm'])} per {c['chip']} chip "
      f"({100 * (1 - r['utilisation']):.0f}% of HBM to spare)"
    )
  else:
    lines.append(
      f"DOES NOT FIT{how}: peak {fb(peak)} > {fb(r['usable'])} usable of {fb(r['hbm'])} per "
      f"{c['chip']} chip. Knobs, biggest memory component first:"
    )
  if not r["fits"] or any(a.component == "optimizer_replicated" for a in advice):
    lines += [f"  {i + 1}. {a.component} ({fb(a.bytes)}): {a.knob}" for i, a in enumerate(advice)]
  return "\n".join(lines)
