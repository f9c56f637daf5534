"""Test-side helpers: random checkpoints made with transformers, and its reference outputs."""
