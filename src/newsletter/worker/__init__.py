"""`newsletter worker`: the long-running process that does what falls due, and the process
one scheduled send runs in."""
