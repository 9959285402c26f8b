"""Command-line helpers that build shipped assets or measure (run as `python -m genenv_jax.scripts.<name>`): commands
like the others, through genenv_jax.cli (absl flags spelled with underscores, a user error as one `error:` line)."""
