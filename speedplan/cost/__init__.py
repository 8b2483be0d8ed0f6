"""Op latency (measured profile first, roofline fallback) and the op list of one forward pass."""
