"""The `newsletter` command line: arguments in, one library call per command, lines out."""

import os

# Pydantic looks for plugins in every installed package's metadata when the first model is
# built: a fifth of the command's start. The CLI uses none (a user can still set the variable).
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
