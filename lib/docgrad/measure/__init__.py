"""Measurement: the models, the probe loop and its resume state, causal mode, reduced precision, benchmarks."""
