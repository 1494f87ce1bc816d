"""`python -m newsletter`: the same as the `newsletter` command."""

from newsletter.cli import main

main()
