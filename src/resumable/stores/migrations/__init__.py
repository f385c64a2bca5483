"""Numbered schema migrations, one folder per SQL dialect."""
