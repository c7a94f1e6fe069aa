"""A compiled model whose conv primitives a lowerer puts on VTA (behavioral device):
bit-exact with the reference interpreter, and the VM's dispatch is a small share of the run."""

import json

from bench_util import load_script


def test_vm_overhead_bench_small_cnn(tmp_path):
    bench = load_script("vm_overhead")
    out = tmp_path / "r.json"
    status = bench.main(["--repeat", "1", "--json", str(out)])
    result = json.loads(out.read_text())
    assert result["exact"] is True
    assert result["median_s"]["device"] > 0          # the kernels ran on the device
    assert result["dispatch_over_device"] < 0.05
    assert status == 0
