"""Diagnosers: memory → compute → communication → scaling. Not built yet (issue 4)."""
