"""attnlib."""
