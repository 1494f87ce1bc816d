"""The public site: one-click unsubscribe (RFC 8058) and the web archive."""
