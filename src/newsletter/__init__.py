"""newsletter: an issue file in git -> responsive email -> every subscriber exactly once."""

__version__ = "0.1.0"
