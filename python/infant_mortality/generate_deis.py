"""Stable entry point `python -m infant_mortality.generate_deis` (also `imr-generate-deis`).

The code lives in `infant_mortality.tools.generate_deis`; this path stays for the documented command.
"""
import sys

from infant_mortality.tools.generate_deis import main

if __name__ == "__main__":
    sys.exit(main())
