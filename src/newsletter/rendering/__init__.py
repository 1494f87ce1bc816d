"""An Issue in; the email out: HTML with CSS inlined and the text part, its size against
Gmail's clip, and where each link sits."""
