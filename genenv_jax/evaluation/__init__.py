"""Evaluation agents (oracle, null, model) behind the evaluate command."""
