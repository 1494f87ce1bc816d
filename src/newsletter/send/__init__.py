"""Delivery: a planned run in, SMTP sessions out, every outcome recorded in the outbox."""
