"""`python -m tracekit.cli …` is the `tracekit` command."""

from tracekit.cli import main

if __name__ == "__main__":
    main()
