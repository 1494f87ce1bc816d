"""The project's private state under .newsletter/: files made 0600/0700 whatever the umask,
and answers remembered for a while."""
