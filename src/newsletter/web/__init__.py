"""The two web apps (the editor's preview and the public site) and what they share."""
