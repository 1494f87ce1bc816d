"""Helpers the tests share: real servers on loopback and the CLI driven as a user would."""
