"""Storage: the only code that knows a database exists."""
