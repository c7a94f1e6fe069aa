"""Sphinx configuration of the vtakit manual (MyST Markdown, Furo, autodoc + napoleon).

Build: ``sphinx-build -W --keep-going -b html docs docs/_build/html``; run every code
example: ``sphinx-build -b doctest docs docs/_build/doctest``.
"""

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import vtakit  # noqa: E402

project = "vtakit"
author = "the vtakit developers"
copyright = "the vtakit developers, Apache-2.0"
release = version = vtakit.__version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.doctest",
    "sphinxcontrib.yowasp_wavedrom",
    "vtakit_isa",          # the ISA field tables, rendered from vtakit.hw.isa at build time
    "vtakit_cli",          # one page per `vtakit` subcommand, from the argparse parsers
    "vtakit_api",          # one page per name of vtakit.__all__
    "vtakit_bench",        # benchmark pages from docs/benchmarks/data/*.json
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "benchmarks/record.py"]

myst_enable_extensions = ["colon_fence", "deflist", "fieldlist", "substitution"]
myst_heading_anchors = 3

# Option names stay as typed ("--calibrate", not an en dash).
smartquotes = False

html_theme = "furo"
html_title = f"vtakit {version}"
html_static_path = ["_static"]

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False
# Docstrings name types in prose ("int", "numpy.ndarray", "callable or None"): a
# cross-reference that does not resolve is not an error.
nitpicky = False


yowasp_wavedrom_skin = "default"

# Doctest: every example runs in the docs folder's parent (the repository), so paths like
# tests/data/mltk/*.tflite resolve; each document is a fresh namespace.
# Examples that need a compiled RTL simulator (`:skipif: not verilator_built`) run when
# its build is in the cache (in CI: built by the tests before the manual), else skip.
doctest_global_setup = f"""
import os
os.chdir({str(DOCS.parent)!r})
import numpy as np
np.set_printoptions(linewidth=88)
from vtakit.tools.demo import rtl_build_cached
verilator_built = rtl_build_cached("verilator", "tiny")
"""
doctest_default_flags = (__import__("doctest").ELLIPSIS
                         | __import__("doctest").NORMALIZE_WHITESPACE)
