"""AXI4 and AXI4-Lite signatures with the AMBA signal names.

Members carry the specification's lower-case names (``awaddr``, ``wvalid``,
...) without a channel level, so a port exported as ``<prefix>_<member>``
(see :func:`vtakit.boards.shell.shell_verilog`) is what Vivado's interface
inference and cocotbext-axi's ``from_prefix`` expect. Both signatures are seen
from the manager's (master's) side.
"""

from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

__all__ = ["axi4_signature", "axi4_lite_signature", "BURST_INCR", "RESP_OKAY", "RESP_SLVERR",
           "AXI4_MAX_BEATS", "AXI4_BOUNDARY"]

#: ``AxBURST`` of an incrementing burst.
BURST_INCR = 0b01
#: ``xRESP`` codes.
RESP_OKAY = 0b00
RESP_SLVERR = 0b10
#: An AXI4 INCR burst moves at most 256 beats and never crosses a 4 KiB boundary.
AXI4_MAX_BEATS = 256
AXI4_BOUNDARY = 4096


def axi4_signature(*, addr_width: int, data_width: int, id_width: int = 1) -> wiring.Signature:
    """An AXI4 manager port (full bursts, no user signals).

    Parameters
    ----------
    addr_width, data_width, id_width : int
        Widths of ``*addr``, ``*data`` and ``*id`` (``wstrb`` has ``data_width // 8`` bits).
    """
    if data_width % 8 or data_width < 8:
        raise ValueError(f"AXI4 data width must be a multiple of 8 bits, not {data_width}")
    addr = {"id": id_width, "addr": addr_width, "len": 8, "size": 3, "burst": 2, "lock": 1,
            "cache": 4, "prot": 3}
    members = {}
    for ch in ("aw", "ar"):
        members.update({f"{ch}{k}": Out(w) for k, w in addr.items()})
        members[f"{ch}valid"] = Out(1)
        members[f"{ch}ready"] = In(1)
        if ch == "aw":
            members.update({"wdata": Out(data_width), "wstrb": Out(data_width // 8),
                            "wlast": Out(1), "wvalid": Out(1), "wready": In(1),
                            "bid": In(id_width), "bresp": In(2), "bvalid": In(1),
                            "bready": Out(1)})
    members.update({"rid": In(id_width), "rdata": In(data_width), "rresp": In(2),
                    "rlast": In(1), "rvalid": In(1), "rready": Out(1)})
    return wiring.Signature(members)


def axi4_lite_signature(*, addr_width: int, data_width: int = 32) -> wiring.Signature:
    """An AXI4-Lite manager port."""
    if data_width not in (32, 64):
        raise ValueError(f"AXI4-Lite data width must be 32 or 64 bits, not {data_width}")
    return wiring.Signature({
        "awaddr": Out(addr_width), "awprot": Out(3), "awvalid": Out(1), "awready": In(1),
        "wdata": Out(data_width), "wstrb": Out(data_width // 8), "wvalid": Out(1),
        "wready": In(1),
        "bresp": In(2), "bvalid": In(1), "bready": Out(1),
        "araddr": Out(addr_width), "arprot": Out(3), "arvalid": Out(1), "arready": In(1),
        "rdata": In(data_width), "rresp": In(2), "rvalid": In(1), "rready": Out(1),
    })
