"""Cost models behind the plan command: FLOPs, bytes, memory and per-phase time."""
