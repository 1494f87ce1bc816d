"""A newsletter of one's own: `newsletter init` (the project's files) and `newsletter deploy`
(the files that run it in production)."""
