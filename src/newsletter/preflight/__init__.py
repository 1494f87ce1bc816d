"""Preflight: will this send land? The sender's DNS and every link of an issue, checked online.

`run.run_online` is the one entry point: settings, an issue and its list size in, Findings (the
same objects `checks.py` makes) out, or one line saying why the online checks were skipped.
"""
