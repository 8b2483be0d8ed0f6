"""The planner: acceptance models, mechanisms, the sweep and the picks read from it."""
