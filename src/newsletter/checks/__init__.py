"""What is checked before a send: the lint over an issue and its render, the template's
leftovers, SpamAssassin's score, and findings written for people and for CI."""
