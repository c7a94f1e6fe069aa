"""Signatures that cross block boundaries inside the VTA RTL and at its top level.

Everything here is sized from a :class:`~vtakit.hw.config.VTAConfig`; blocks
connect only through these signatures (``lib.stream`` for handshaked transfers,
``lib.memory`` port signatures for SRAMs).

DRAM protocol (both the internal clients and the top-level master):

* A read is a ``req`` transfer (byte ``addr``, aligned to the bus width, and
  ``beats`` >= 1 bus words) followed by exactly ``beats`` ``data`` transfers,
  in order. Requests of one port complete in order.
* A write is a ``req`` transfer followed by exactly ``beats`` ``data`` transfers
  from the master; the beats of the requests come in request order, the first one
  in the cycle after its request at the earliest. Request-ahead: the port may
  accept the next requests (up to :data:`~vtakit.hw.spec.WRITE_AHEAD` beyond the
  one whose beats it receives) while earlier requests' beats stream, so a master
  may offer its next request at any time and keep streaming beats meanwhile. A
  write is complete, and visible to every later read, once its last data beat has
  been accepted.

Control/status registers (32 bits, byte offsets; see :data:`REGISTERS`).
"""


from amaranth.hdl import unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .config import VTAConfig
# The plain (Amaranth-free) parts of the hardware contract, re-exported here.
from .spec import (DEFAULT_CMD_DEPTH, DEFAULT_TOKEN_DEPTH, DEP_QUEUES, DMA_BEATS_BITS,
                   DRAM_ADDR_BITS, INSN_BITS, REGISTERS, TOKEN_QUEUES, WRITE_AHEAD, ErrorCode,
                   Reg, Unit)

__all__ = [
    "DRAM_ADDR_BITS", "DMA_BEATS_BITS", "WRITE_AHEAD", "DmaRequest", "dma_read_signature", "dma_write_signature",
    "TokenSignature", "token_ports", "dep_ports", "Command", "CommandSignature", "CsrSignature", "REGISTERS", "Reg",
    "ErrorCode", "ErrorReport", "Unit", "DEFAULT_TOKEN_DEPTH", "DEFAULT_CMD_DEPTH",
    "accept_command", "report_error",
]



class DmaRequest(data.Struct):
    """A DRAM burst: byte address (bus aligned) and number of bus beats (>= 1)."""

    addr: DRAM_ADDR_BITS
    beats: DMA_BEATS_BITS


def dma_read_signature(config: VTAConfig) -> wiring.Signature:
    """A DRAM read port, from the master's side."""
    return wiring.Signature({
        "req": Out(stream.Signature(DmaRequest)),
        "data": In(stream.Signature(config.bus_width)),
    })


def dma_write_signature(config: VTAConfig) -> wiring.Signature:
    """A DRAM write port, from the master's side."""
    return wiring.Signature({
        "req": Out(stream.Signature(DmaRequest)),
        "data": Out(stream.Signature(config.bus_width)),
    })


#: One dependency token (the payload carries nothing; only the handshake counts).
TokenSignature = stream.Signature(unsigned(1))


def token_ports(unit: Unit) -> dict:
    """The token-queue ports of ``unit``'s signature, named as the queues of
    :data:`~vtakit.hw.spec.TOKEN_QUEUES`: ``In`` for the queues it pops, ``Out`` for the
    queues it pushes."""
    ports = {}
    for name, (producer, consumer) in TOKEN_QUEUES.items():
        if consumer == unit:
            ports[name] = In(TokenSignature)
        elif producer == unit:
            ports[name] = Out(TokenSignature)
    return ports


def dep_ports(component, unit: Unit) -> dict:
    """``{dependency flag: token port}`` of a unit's component, by
    :data:`~vtakit.hw.spec.DEP_QUEUES` (flags without a queue are left out)."""
    return {flag: getattr(component, name) for flag, name in DEP_QUEUES[unit].items()
            if name is not None}


class Command(data.Struct):
    """A dispatched instruction and its index in the stream (for error reports)."""

    insn: INSN_BITS
    index: 32


#: The fetch -> module command queues.
CommandSignature = stream.Signature(Command)

#: Control/status register bus, from the host's side. Reads are combinational
#: (``r_data`` shows the register at ``addr`` in the same cycle); a write takes
#: effect on the clock edge where ``w_en`` is high.
CsrSignature = wiring.Signature({
    "addr": Out(8),
    "w_en": Out(1),
    "w_data": Out(32),
    "r_data": In(32),
})


class ErrorReport(data.Struct):
    """A module's fault: ``valid`` while the fault is reported, its ErrorCode and the
    index (in the instruction stream) of the faulting instruction."""

    valid: 1
    code: 4
    index: 32


def accept_command(m, cmd, insn, index) -> None:
    """In a module's FSM state: take the next command from ``cmd`` (an
    ``In(CommandSignature)``), latching its instruction into ``insn`` and its index into
    ``index``, and go to ``"POP"``; without one, go to ``"IDLE"``."""
    m.d.comb += cmd.ready.eq(1)
    with m.If(cmd.valid):
        m.d.sync += [insn.eq(cmd.payload.insn), index.eq(cmd.payload.index)]
        m.next = "POP"
    with m.Else():
        m.next = "IDLE"


def report_error(m, error, code, index) -> None:
    """Latch a fault into ``error`` (an ``Out(ErrorReport)``): its code and the faulting
    instruction's index; the module goes to ``"ERROR"`` and stays there until reset."""
    m.d.sync += [error.valid.eq(1), error.code.eq(code), error.index.eq(index)]
    m.next = "ERROR"
