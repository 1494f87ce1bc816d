"""What readers read: click events, people told from machines, the report."""
