"""SQL text helpers shared by the modules that compose DuckDB statements."""


def sql_str(text: str) -> str:
    """A SQL string literal: single-quoted, inner quotes doubled."""
    return "'" + text.replace("'", "''") + "'"
