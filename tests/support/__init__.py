"""Helpers the tests share: real servers on loopback and the CLI driven as a user would."""

# How often a test server's serve_forever looks for its shutdown: socketserver's default, 0.5 s,
# was waited out at the end of every test that started one.
POLL = 0.01
