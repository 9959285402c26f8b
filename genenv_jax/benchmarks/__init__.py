"""The benchmarks: one package per benchmark (evaluator + training family), shared parsing, registries."""
