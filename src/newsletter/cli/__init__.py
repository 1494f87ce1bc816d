"""The `newsletter` command line: arguments in, one library call per command, lines out."""
