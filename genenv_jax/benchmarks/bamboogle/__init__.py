"""Bamboogle: the evaluator and the closed-book QA training task family."""
