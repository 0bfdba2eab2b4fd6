"""``python -m gs_gym``: the ``gs-gym`` command line."""

import sys

from gs_gym.cli import main

if __name__ == "__main__":
    sys.exit(main())
