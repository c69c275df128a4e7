"""What the pages show: frames, sentence builders, charts."""
