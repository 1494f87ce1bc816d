"""The bytes of one message: MIME parts, headers, DKIM signing and unsubscribe tokens."""
