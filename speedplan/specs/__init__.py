"""What is being planned for: model architectures and hardware, read from JSON presets."""
