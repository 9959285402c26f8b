"""BFCL: the evaluator, its checker and languages, prompts and its training task family."""
