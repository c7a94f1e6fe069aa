"""A compiled model whose conv primitives a lowerer puts on VTA (behavioral device):
bit-exact with the reference interpreter, and the VM's dispatch is a small share of the run."""

import importlib.util
import json
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "bench" / "vm_overhead.py"


def test_vm_overhead_bench_small_cnn(tmp_path):
    spec = importlib.util.spec_from_file_location("vm_overhead", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "r.json"
    status = bench.main(["--repeat", "1", "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["exact"] is True
    assert result["median_s"]["device"] > 0          # the kernels ran on the device
    assert result["dispatch_over_device"] < 0.05
    assert status == 0
