"""The editor's live preview: issue files in, pages that reload on every save out."""
