"""The plan command's machinery (genenv_jax.plan): what it plans for, read from the settings tree (workload: the
slice, the mesh, the step's rows and lengths; models: the models' shapes), the analytic cost models (analytic, costs:
FLOPs, bytes, memory and per-phase time), the compiled program's figures (planner, hlo), the memory-knob search (fit),
the slice topologies (topology) and the report (report)."""
