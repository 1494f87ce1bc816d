"""The files strangers and editors hand us, read safely: CSV records with their lines, text
encodings, image headers, and text made safe to show."""
