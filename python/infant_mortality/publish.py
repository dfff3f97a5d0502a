"""Stable entry point `python -m infant_mortality.publish` (`make warehouse`, `make docs`).

The code lives in `infant_mortality.tools.publish`; this path stays for the documented command.
"""
import sys

from infant_mortality.tools.publish import main

if __name__ == "__main__":
    sys.exit(main())
