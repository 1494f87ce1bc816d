"""Welcome sequences: numbered emails a reader gets over time after joining (issue 35)."""
