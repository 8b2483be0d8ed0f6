"""Measured profiles: read and check a profile folder, answer op latencies from it, and the
tools around it (leave-one-out check, bench grids, derived and imported profiles)."""
