"""`python -m turnkeeper …` runs the command line."""

from turnkeeper.cli import main

if __name__ == "__main__":
    main()
