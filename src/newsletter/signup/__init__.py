"""What stands between a stranger's POST and a confirmation mail: proof of work (challenge.py),
rate limits (limits.py), the form's own checks and honeypot (form.py), at most one confirmation
per mailbox per day (pending.py) and the domain check (domains.py). Each is a value in, a
verdict out, so every signup endpoint runs the same checks in the same order."""
