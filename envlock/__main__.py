"""``python -m envlock`` (also what ``torchrun -m envlock fleet`` runs)."""

import sys

from envlock.cli import main

if __name__ == "__main__":
    sys.exit(main())
