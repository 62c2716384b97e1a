"""Reference jobs and capture() for users' loops. Not built yet (issue 3)."""
