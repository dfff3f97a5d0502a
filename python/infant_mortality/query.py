"""Stable entry point `python -m infant_mortality.query`: the read-only query command.

The code lives in `infant_mortality.tools.query`; this path stays for the documented command.
"""
import sys

from infant_mortality.tools.query import main

if __name__ == "__main__":
    sys.exit(main())
