"""Subject tests: a sample gets each subject; people's clicks pick the one the rest get."""
