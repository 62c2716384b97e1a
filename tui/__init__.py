"""The Textual drill-down app. Not built yet."""
