"""Bounce and complaint events that email providers POST to `serve`: one module per provider."""
