"""Stable entry point `python -m infant_mortality.gis`: the GeoPackage of a warehouse's marts.

The code lives in `infant_mortality.tools.gis`; this path stays for the documented command.
"""
import sys

from infant_mortality.tools.gis import main

if __name__ == "__main__":
    sys.exit(main())
