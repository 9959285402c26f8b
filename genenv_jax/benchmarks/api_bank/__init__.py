"""API-Bank: the evaluator and its training task family."""
