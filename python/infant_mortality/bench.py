"""Stable entry point `python -m infant_mortality.bench`: the scale benchmark (`make bench`).

The code lives in `infant_mortality.tools.bench`; this path stays for the documented command.
"""
import sys

from infant_mortality.tools.bench import main

if __name__ == "__main__":
    sys.exit(main())
