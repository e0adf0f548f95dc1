"""`python -m embedders export [--force]`: build the ONNX file of the bundled model (offline, once)."""

import sys

from .onnx_backend import main

sys.exit(main())
