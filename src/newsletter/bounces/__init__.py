"""Bounces and complaints: mail that comes back after the relay's 250 becomes suppressions.

reports.py parses one mail into a classified Report, verp.py signs and reads the return-path tag,
inbox.py reads the mailbox (IMAP over TLS or a Maildir), policy.py decides who is suppressed.
"""
