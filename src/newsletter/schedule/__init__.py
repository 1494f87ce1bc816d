"""Scheduled sends: `newsletter send --at` books one, `newsletter worker` starts it when due."""
