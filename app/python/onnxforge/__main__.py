"""``python3 -m onnxforge ARGS``: the onnxforge command line, run in this process."""
import sys

from . import main

sys.exit(main())
