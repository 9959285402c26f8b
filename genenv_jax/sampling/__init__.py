"""Batched autoregressive sampling with a KV cache."""
