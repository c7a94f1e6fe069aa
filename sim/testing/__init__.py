"""vtakit.testing: what the tests and the benchmarks share.

* :mod:`vtakit.testing.programs`: program builders (TVM's instruction tests, padded
  loads, a tiled double-buffered GEMM) with their numpy expectations;
* :mod:`vtakit.testing.fixtures`: the golden fixtures (DRAM images plus the expected
  final DRAM) and their replay on any device;
* :mod:`vtakit.testing.inputs`: random model inputs.

Imported as ``vtakit.testing`` (the package lives in ``sim/testing/``).
"""

if __name__ != "vtakit.testing":      # one module identity, whatever the install mode
    raise ImportError(f"import this package as vtakit.testing, not {__name__}")

from .fixtures import (FIXTURE_DIR, Fixture, assert_replay, first_difference, fixture_path,
                       load_fixtures)
from .inputs import model_inputs
from .programs import PROGRAMS, Check, verify

__all__ = ["FIXTURE_DIR", "Fixture", "assert_replay", "first_difference", "fixture_path",
           "load_fixtures", "model_inputs", "PROGRAMS", "Check", "verify"]
