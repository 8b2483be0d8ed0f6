"""Training the runtime's drafters (draft-model student, EAGLE head) on the target's own text."""
