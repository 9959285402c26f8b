"""ALFWorld: the evaluator, its environment and episodes, and its step-level training family."""
