"""python -m faildex: the same as the `faildex` command."""
import sys

from .command import main

sys.exit(main())
