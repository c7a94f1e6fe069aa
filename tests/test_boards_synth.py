"""Synthesis reports with the YoWASP tools: fields, fit, overflow message and suggestion.

The CI tests run small components (seconds each once YoWASP has compiled its
WebAssembly, about a minute per tool on a fresh machine); whole VTA configs
take minutes to tens of minutes and are marked slow.
"""

import json

import pytest
from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from vtakit.boards import SynthReport, TARGETS, format_table, reports_to_json, synthesize
from vtakit.boards.axil_csr import AxiLiteToCsr
from vtakit.boards.fit import candidates, estimate, suggest_fit
from vtakit.boards.report import Overflow, critical_paths
from vtakit.boards.synth import design_cells
from vtakit.boards.targets import DSP_RESERVE
from vtakit.hw.config import VTAConfig, load_config
from vtakit.hw.gemm import GemmCore, Multiplier



class Multipliers(wiring.Component):
    """``n`` registered 8x8 multipliers (each one DSP on iCE40 with ``synth_ice40 -dsp``)."""

    def __init__(self, n):
        self.n = n
        super().__init__({"a": In(8 * n), "b": In(8 * n), "p": Out(16 * n)})

    def elaborate(self, platform):
        m = Module()
        for i in range(self.n):
            m.d.sync += self.p[16 * i:16 * i + 16].eq(self.a[8 * i:8 * i + 8] * self.b[8 * i:8 * i + 8])
        return m


@pytest.mark.parametrize("target", ["ecp5-85k", "ice40-up5k"])
def test_small_design_is_placed_and_routed(target, tmp_path):
    r = synthesize(AxiLiteToCsr(), target, name="axil_csr", workdir=tmp_path)
    assert r.source == "nextpnr" and r.fits and r.target == target
    assert 10 < r.fmax_mhz < 1000
    assert r.resources["dsp"] == 0 and r.resources["bram"] == 0
    assert r.resources["lut"] > 0
    assert r.resources["ff"] >= r.harness["ff"]   # the harness registers every port bit
    assert r.capacity == TARGETS[target].capacity
    assert set(r.seconds) == {"rtlil", "yosys", "nextpnr"}
    assert (tmp_path / "pnr.json").exists() and (tmp_path / "yosys.log").exists()
    data = json.loads(reports_to_json([r]))[0]
    assert data["fits"] and data["fmax_mhz"] == r.fmax_mhz
    assert SynthReport.from_dict(data).resources == r.resources
    assert "axil_csr" in format_table([r]).splitlines()[2]
    # nextpnr's worst clock-to-clock path, named in the design's hierarchy, is the period
    worst = r.critical_paths[0]
    assert "<async>" not in worst["clocks"] and worst["source"] and worst["sink"]
    assert abs(1000 / r.fmax_mhz - worst["delay_ns"]) < 0.05 * worst["delay_ns"]
    assert data["critical_paths"] == r.critical_paths


#: A GEMM of 2 x 4 x 4 products (BATCH 2, BLOCK 4): small enough to synthesize in seconds.
SMALL_GEMM = VTAConfig(log_batch=1, log_block=2, log_uop_buff_size=6, log_inp_buff_size=6,
                       log_wgt_buff_size=6, log_acc_buff_size=6)


@pytest.mark.parametrize("target", ["xilinx-7", "ecp5-85k"])
def test_dsp_budget_leaves_the_rest_to_luts(target, tmp_path):
    """A budget of 5 of the 32 products: 5 hard multipliers, the rest in logic; on the
    ECP5 each one a MULT18X18D with its input and output registers (nextpnr times it as
    registered). The counts include the submodules' cells (the xilinx-7 flow keeps the
    hierarchy): at least the 27 LUT multipliers' product registers."""
    r = synthesize(GemmCore(SMALL_GEMM), target, name="gemm32", dsp_budget=5,
                   place_and_route=False, workdir=tmp_path)
    assert r.resources["dsp"] == 5 and r.dsp_budget == 5
    # 16 product flip-flops in each LUT multiplier (the operand registers of a flattened
    # netlist are shared between the lanes that multiply the same input)
    assert r.resources["ff"] >= r.harness["ff"] + 27 * 16
    full = synthesize(GemmCore(SMALL_GEMM), target, name="gemm32", place_and_route=False)
    assert full.resources["dsp"] == 32 and full.resources["lut"] < r.resources["lut"]
    if target == "ecp5-85k":
        netlist = (tmp_path / "top.il").read_text()
        assert netlist.count("cell \\MULT18X18D") == 5
        for param in ("REG_INPUTA_CLK", "REG_INPUTB_CLK", "REG_OUTPUT_CLK"):
            assert netlist.count(f'parameter \\{param} "CLK0"') == 5


def test_lut_multiplier_is_carry_chains(tmp_path):
    """An 8x8 LUT multiplier on the ECP5 is a tree of carry chains (``CCU2C``): 64 LUT4
    and 36 CCU2C (136 LUT sites). Had Yosys merged its adds into one ``$macc`` (what it
    does to a plain sum), abc would build a full-adder array of about 320 LUT4 and 170
    PFUMX/L6MUX21, which the 116 LUT multipliers of ``mid`` could not route."""
    r = synthesize(Multiplier(8, 8, "lut"), "ecp5-85k", name="mul8", place_and_route=False,
                   workdir=tmp_path)
    assert r.resources["dsp"] == 0
    assert r.cells.get("CCU2C", 0) >= 7 * 4          # 7 adds of 8 bits or more
    assert r.resources["lut"] - r.harness["lut"] <= 150
    assert r.cells.get("L6MUX21", 0) == 0


def test_dsp_budget_follows_the_target():
    default, tiny = load_config("default"), load_config("tiny")
    assert TARGETS["ecp5-85k"].gemm_dsp_budget(tiny) is None       # 64 of 156: all hard
    assert TARGETS["xilinx-7"].gemm_dsp_budget(default) == 220 - DSP_RESERVE
    assert TARGETS["ecp5-85k"].gemm_dsp_budget(default) == 156 - DSP_RESERVE
    requant = tiny.replace(extensions=("requant",))
    assert TARGETS["ecp5-85k"].gemm_dsp_budget(requant) is None     # 64 + 32 + 12 <= 156
    assert TARGETS["ice40-up5k"].gemm_dsp_budget(tiny) == 0


def test_critical_paths_from_a_nextpnr_report():
    """Paths of a report as nextpnr writes them: hierarchy names without Yosys's cell
    suffixes, logic and routing summed, longest first."""
    def seg(kind, src, dst, delay, net=None):
        s = {"type": kind, "delay": delay, "from": {"cell": src, "port": "Q", "loc": [1, 2]},
             "to": {"cell": dst, "port": "A", "loc": [3, 4]}}
        if net:
            s["net"] = net
        return s
    report = {"critical_paths": [
        {"from": "posedge clk", "to": "posedge clk", "path": [
            seg("clk-to-q", "dut.compute.s2_dst_TRELLIS_FF_Q_3", "dut.compute.s2_dst_TRELLIS_FF_Q_3", 0.5),
            seg("routing", "dut.compute.s2_dst_TRELLIS_FF_Q_3", "dut.compute.fwd_LUT4_Z", 1.25, "n1"),
            seg("logic", "dut.compute.fwd_LUT4_Z", "dut.compute.fwd_LUT4_Z", 0.25),
            seg("routing", "dut.compute.fwd_LUT4_Z", "dut.compute.acc_mem.0.0", 2.0, "n2"),
            seg("setup", "dut.compute.acc_mem.0.0", "dut.compute.acc_mem.0.0", 0.125)]},
        {"from": "<async>", "to": "posedge clk", "path": [
            seg("source", "rst", "rst", 0.0),
            seg("routing", "rst", "dut.fetch.state_TRELLIS_FF_Q", 1.0, "rst")]},
    ]}
    paths = critical_paths(report)
    assert [p.delay_ns for p in paths] == [4.125, 1.0]    # clock to clock, then I/O
    worst = paths[0]
    assert (worst.logic_ns, worst.routing_ns) == (0.875, 3.25)
    assert worst.source == "compute.s2_dst" and worst.sink == "compute.acc_mem.0.0"
    assert worst.through == ("compute.fwd",) and worst.clocks == "posedge clk -> posedge clk"
    assert str(worst) == ("4.12 ns (0.88 logic, 3.25 routing): compute.s2_dst -> "
                          "compute.acc_mem.0.0 via 1 cells")
    assert critical_paths(report, limit=1) == [worst] and critical_paths({}) == []


def test_design_cells_sum_the_hierarchy():
    """Whole-design counts from ``stat -json``: each submodule instance replaced by its
    own counts (recursively); Yosys's scope markers dropped."""
    stat = {"modules": {
        "\\top": {"num_cells_by_type": {"FDRE": 10, "top.dut": 1, "$scopeinfo": 2}},
        "\\top.dut": {"num_cells_by_type": {"LUT6": 3, "top.dut.mul": 2, "FDRE": 1}},
        "\\top.dut.mul": {"num_cells_by_type": {"LUT2": 4, "FDRE": 16, "CARRY4": 1}},
    }}
    assert design_cells(stat, "top") == {"CARRY4": 2, "FDRE": 43, "LUT2": 8, "LUT6": 3}
    flat = {"modules": {"\\top": {"num_cells_by_type": {"LUT4": 5, "TRELLIS_FF": 7}}}}
    assert design_cells(flat, "top") == {"LUT4": 5, "TRELLIS_FF": 7}


def test_xilinx_is_a_yosys_estimate():
    r = synthesize(Multipliers(2), "xilinx-7", name="mul2")
    assert r.source == "yosys" and r.fmax_mhz is None
    assert r.resources["dsp"] == 2 and r.fits


def test_overflow_names_resource_and_excess():
    r = synthesize(Multipliers(12), "ice40-up5k", name="mul12")
    assert not r.fits and r.source == "yosys" and r.fmax_mhz is None   # no place and route
    assert r.overflow == [Overflow("dsp", 12, 8)]
    assert r.overflow_message() == (
        "mul12 does not fit ice40-up5k (Lattice iCE40 UltraPlus UP5K (SG48)): "
        "dsp 12 > 8 (+4, 150% of the device)")
    assert "dsp" in format_table([r]) and "!" in format_table([r])


def _report(config, target, resources):
    t = TARGETS[target]
    return SynthReport(design=config.name, target=target, device=t.device, resources=resources,
                       capacity=dict(t.capacity), harness={"ff": 300, "lut": 150},
                       overflow=[Overflow(k, v, t.capacity[k]) for k, v in resources.items()
                                 if v > t.capacity[k]])


def test_suggestion_is_the_largest_candidate_that_fits():
    default = load_config("default")
    # default's Yosys counts on the Zynq-7020 with the BRAM over the device's 140.
    report = _report(default, "xilinx-7", {"lut": 30000, "ff": 20000, "dsp": 260, "bram": 300})
    text = suggest_fit(default, report)
    assert text.startswith("largest config estimated to fit: ")
    name = text.split(": ")[1].split(" ")[0]
    fitting = [c for c, _ in candidates(default)
               if all(v <= TARGETS["xilinx-7"].capacity[k]
                      for k, v in estimate(c, report, default).items())]
    assert fitting and fitting[0].name == name
    chosen = fitting[0]
    assert chosen.macs_per_cycle <= default.macs_per_cycle
    assert estimate(chosen, report, default)["bram"] <= 140


def test_no_config_fits_says_so():
    tiny = load_config("tiny")
    report = _report(tiny, "ice40-up5k", {"lut": 16000, "ff": 6700, "dsp": 64, "bram": 100})
    text = suggest_fit(tiny, report)
    assert text.startswith("no vtakit config is estimated to fit ice40-up5k: even the smallest, ")
    assert "lut" in text


def test_estimate_scales_back_to_the_reference():
    tiny = load_config("tiny")
    report = _report(tiny, "ecp5-85k", {"lut": 15768, "ff": 6409, "dsp": 70, "bram": 52})
    assert estimate(tiny, report, tiny) == {"lut": 15768, "ff": 6409, "dsp": 70, "bram": 52}


@pytest.mark.slow
def test_tiny_on_ecp5_full_flow():
    from vtakit.boards import synth_config
    r = synth_config("tiny", "ecp5-85k")
    assert r.fits and r.source == "nextpnr" and r.fmax_mhz > 10
    assert r.resources["dsp"] > 0 and r.resources["bram"] > 0


@pytest.mark.slow
def test_tiny_does_not_fit_up5k_and_gets_a_suggestion():
    from vtakit.boards import synth_config
    r = synth_config("tiny", "ice40-up5k", place_and_route=False)
    assert not r.fits and r.suggestion
    assert r.overflow_message().startswith("1x8_i8w8a32_12_12_14_14 does not fit ice40-up5k")


@pytest.mark.slow
def test_default_fits_the_zynq_7020():
    """Issue 38: the 16x16 GEMM of ``default`` on the PYNQ's Zynq-7020 (Yosys estimate;
    about 5 minutes): the DSP budget keeps the DSP48E1s within the part's 220 and the
    rest of the products in LUTs."""
    from vtakit.boards import synth_config
    r = synth_config("default", "xilinx-7")
    assert r.fits and r.source == "yosys" and r.dsp_budget == 220 - DSP_RESERVE
    assert r.dsp_budget <= r.resources["dsp"] <= 220 and r.resources["lut"] <= 53200


def _bench_synth():
    from bench_util import load_script
    return load_script("synth")


def test_bench_synth_passes_nextpnr_settings(tmp_path, monkeypatch, capsys):
    """bench/synth.py hands --freq, --seed and --pnr-args to nextpnr (through
    synth_config) and records them beside the revision; without them the kit's defaults
    run (the family's clock target, seed 1, no extra arguments) and nothing is recorded."""
    from test_latency import _recorded
    bench = _bench_synth()
    calls = []

    def fake(config, target, **kw):
        calls.append(kw)
        return _recorded()
    monkeypatch.setattr(bench, "synth_config", fake)
    out = tmp_path / "a.json"
    bench.main(["--configs", "tiny", "--targets", "ecp5-85k", "--json", str(out)])
    assert calls[-1]["freq_mhz"] is None and calls[-1]["seed"] == 1
    assert calls[-1]["pnr_args"] == ()
    assert "nextpnr" not in json.loads(out.read_text())
    bench.main(["--configs", "tiny", "--targets", "ecp5-85k", "--json", str(out),
                "--freq", "40", "--seed", "3", "--pnr-args", "--router router2"])
    assert calls[-1]["freq_mhz"] == 40 and calls[-1]["seed"] == 3
    assert calls[-1]["pnr_args"] == ("--router", "router2")
    assert json.loads(out.read_text())["nextpnr"] == {
        "freq_mhz": 40, "seed": 3, "args": ["--router", "router2"]}
    assert "; nextpnr --freq 40 --seed 3 --router router2\n" in capsys.readouterr().out
