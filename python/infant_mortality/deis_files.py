"""Stable entry point `python -m infant_mortality.deis_files`: list and check DEIS files (JSON).

The code lives in `infant_mortality.dbt_plugins.deis_files`; this path stays for the documented command.
"""
import sys

from infant_mortality.dbt_plugins.deis_files import main

if __name__ == "__main__":
    sys.exit(main())
