#!/usr/bin/python3
"""Script form of the CLI: /usr/bin/python3 tools/export/export.py --model ... --out ...
(same as `/usr/bin/python3 -m tools.export`; import the package `tools.export`, not this file)."""
import os
import sys

if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    from tools.export.cli import main

    sys.exit(main())
