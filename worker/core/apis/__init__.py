"""Output APIs beside chat and completions."""
