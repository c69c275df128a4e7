"""Running things: in-kernel page helpers, the notebook runner, the HTML report, the command line."""
