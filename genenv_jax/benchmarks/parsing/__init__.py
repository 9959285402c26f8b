"""Parsing shared by the benchmarks' scorers: tag scanning, tool-call syntaxes, QA metrics."""
