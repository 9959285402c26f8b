"""Command-line helpers that build shipped assets (run as `python -m genenv_jax.scripts.<name>`)."""
