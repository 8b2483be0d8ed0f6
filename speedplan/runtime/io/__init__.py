"""Loading weights, tokenizers, prompts and trace files for the runtime."""
