import sys

from infant_mortality.report import main

sys.exit(main())
