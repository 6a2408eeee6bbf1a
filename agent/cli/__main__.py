"""`python -m agent.cli` is `agentrt`."""

import sys

from agent.cli.main import main

sys.exit(main())
