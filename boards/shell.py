"""The VTA behind standard buses: an AXI4 manager for DRAM, an AXI4-Lite register port.

::

                 +--------------------------- VTAShell ----------------------------+
    s_axil  ---->| AxiLiteToCsr --csr--> [shell regs] --csr--> VTA --dram_rd/wr--> |
    (host)       |                                                DramToAxi4 ----->|----> m_axi (DRAM)
                 +-----------------------------------------------------------------+

The register map is the VTA's (:class:`vtakit.hw.interfaces.Reg`) plus
:data:`SHELL_STATUS`. The shell holds ``done`` (CTRL bit 1 and ``irq``) back
while a DRAM write still waits for its AXI response, so a host that sees done
reads the final DRAM.

:func:`shell_verilog` writes the shell as Verilog with flat AMBA port names
(``m_axi_awaddr``, ``s_axil_rdata``, ...), the names Vivado's IP packager and
cocotbext-axi's ``from_prefix`` recognise.
"""

from __future__ import annotations

import enum

from amaranth.hdl import Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..hw.config import VTAConfig, load_config
from ..hw.interfaces import DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, Reg
from .axi import axi4_lite_signature, axi4_signature
from .axi_dram import DramToAxi4
from .axil_csr import AxiLiteToCsr

__all__ = ["VTAShell", "ShellStatus", "SHELL_STATUS", "shell_verilog", "shell_ports",
           "SHELL_TOP_NAME"]

#: Byte offset of the shell's own status register (read; write any value to clear the errors).
SHELL_STATUS = 0x40
#: Name of the top module :func:`shell_verilog` writes.
SHELL_TOP_NAME = "vta_axi"


class ShellStatus(enum.IntFlag):
    """Bits of :data:`SHELL_STATUS`."""

    WRITE_PENDING = 1   # a DRAM write waits for its AXI response
    WRITE_ERROR = 2     # sticky: a B response was SLVERR/DECERR
    READ_ERROR = 4      # sticky: an R beat was SLVERR/DECERR


class VTAShell(wiring.Component):
    """``vtakit.hw.top.VTA`` with an AXI4 DRAM manager and an AXI4-Lite register port.

    Parameters
    ----------
    config : VTAConfig or str
    token_depth, cmd_depth : int
        Passed to :class:`~vtakit.hw.top.VTA`.
    csr_addr_width : int
        Address width of ``s_axil`` (12: a 4 KiB window).
    id_width : int
        AXI ID width of ``m_axi``.

    Attributes
    ----------
    s_axil : In(axi4_lite_signature(addr_width=csr_addr_width))
        Control/status registers, from the host.
    m_axi : Out(axi4_signature(addr_width=32, data_width=config.bus_width))
        DRAM. Addresses are the VTA's byte addresses, unchanged.
    irq : Out(1)
        High while done or error is set (and no DRAM write is pending).
    """

    def __init__(self, config, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
                 cmd_depth: int = DEFAULT_CMD_DEPTH, csr_addr_width: int = 12, id_width: int = 1):
        from ..hw.top import VTA
        self.config = config = load_config(config)
        self.vta = VTA(config, token_depth=token_depth, cmd_depth=cmd_depth)
        self.csr_bridge = AxiLiteToCsr(addr_width=csr_addr_width)
        self.dram_bridge = DramToAxi4(config, id_width=id_width)
        super().__init__({
            "s_axil": In(axi4_lite_signature(addr_width=csr_addr_width)),
            "m_axi": Out(axi4_signature(addr_width=32, data_width=config.bus_width,
                                        id_width=id_width)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.vta = vta = self.vta
        m.submodules.csr_bridge = cb = self.csr_bridge
        m.submodules.dram_bridge = db = self.dram_bridge
        wiring.connect(m, wiring.flipped(self.s_axil), cb.axil)
        wiring.connect(m, vta.dram_rd, db.dram_rd)
        wiring.connect(m, vta.dram_wr, db.dram_wr)
        wiring.connect(m, db.axi, wiring.flipped(self.m_axi))

        pending = db.write_pending
        status = Signal(ShellStatus)
        m.d.comb += status.eq((pending * ShellStatus.WRITE_PENDING)
                              | (db.write_error * ShellStatus.WRITE_ERROR)
                              | (db.read_error * ShellStatus.READ_ERROR))
        # CTRL while a write is pending: busy, not done (bit0 busy, bit1 done, bit2 error).
        ctrl = Mux(pending, (vta.csr.r_data & ~0b010) | 0b001, vta.csr.r_data)
        own = cb.csr.addr == SHELL_STATUS
        m.d.comb += [
            vta.csr.addr.eq(cb.csr.addr),
            vta.csr.w_data.eq(cb.csr.w_data),
            vta.csr.w_en.eq(cb.csr.w_en & ~own),
            db.clear_errors.eq(cb.csr.w_en & own),
            cb.csr.r_data.eq(Mux(own, status, Mux(cb.csr.addr == Reg.CTRL, ctrl,
                                                   vta.csr.r_data))),
            self.irq.eq(vta.irq & ~pending),
        ]
        return m


def shell_ports(shell: VTAShell) -> dict:
    """``{verilog_name: (signal, None)}`` of the shell's ports (``m_axi_awaddr``, ...), the
    form ``amaranth.back.verilog.convert(ports=...)`` takes (directions follow the drivers)."""
    return {"_".join(str(p) for p in path): (value, None)
            for path, _member, value in shell.signature.flatten(shell)}


def shell_verilog(config, *, token_depth: int = DEFAULT_TOKEN_DEPTH,
                  cmd_depth: int = DEFAULT_CMD_DEPTH, name: str = SHELL_TOP_NAME) -> str:
    """The shell as deterministic Verilog, with flat AMBA port names plus ``clk`` and ``rst``
    (synchronous, active high) and a header naming the config."""
    from amaranth.back import verilog
    config = load_config(config)
    shell = VTAShell(config, token_depth=token_depth, cmd_depth=cmd_depth)
    text = verilog.convert(shell, name=name, ports=shell_ports(shell), emit_src=False)
    header = (f"// VTA accelerator with AXI4 (m_axi, DRAM) and AXI4-Lite (s_axil, registers) "
              f"ports, generated by vtakit\n"
              f"// config: {config.name} (bus {config.bus_width} bits); clk, rst: synchronous "
              f"active-high reset\n")
    return header + text
