"""Predictions against measurements: the reference runtime on CPU, repricing, GPU verify timing."""
