"""`python -m newsletter`: the same as the `newsletter` command."""

from newsletter.cli.main import main

main()
