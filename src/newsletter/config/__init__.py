"""newsletter.toml and the environment in; one typed, validated Settings out (and the
PostgreSQL URL's secrets kept out of sight)."""
