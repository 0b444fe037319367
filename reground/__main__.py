import sys

from reground.cli import main

sys.exit(main())
