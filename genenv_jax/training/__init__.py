"""The training loop around the step: warm start, checkpoints, metrics."""
