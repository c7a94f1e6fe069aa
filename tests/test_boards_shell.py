"""The AXI shell's Verilog export and the bus signatures' argument checks."""

import gc
import re

import pytest

from vtakit.boards.axi import axi4_lite_signature, axi4_signature
from vtakit.boards.axil_csr import AxiLiteToCsr
from vtakit.boards.shell import SHELL_TOP_NAME, shell_verilog


def test_shell_verilog_is_deterministic_with_amba_port_names():
    text = shell_verilog("tiny")
    assert text == shell_verilog("tiny")
    body = text.split(f"module {SHELL_TOP_NAME}(", 1)[1].split("endmodule", 1)[0]
    ports = dict((name, kind) for kind, name in
                 re.findall(r"^\s*(input|output)\s+(?:\[\d+:0\]\s+)?(\w+);", body, re.M))
    assert ports["m_axi_awaddr"] == "output" and ports["m_axi_rdata"] == "input"
    assert ports["s_axil_awaddr"] == "input" and ports["s_axil_rdata"] == "output"
    assert {"clk", "rst", "irq"} <= set(ports)
    assert re.search(r"output \[63:0\] m_axi_wdata;", body)   # tiny: 64-bit bus
    assert len([p for p in ports if p.startswith("m_axi_")]) == 35
    assert len([p for p in ports if p.startswith("s_axil_")]) == 19


# The component object exists before its __init__ raises; Amaranth then warns it was unused.
@pytest.mark.filterwarnings("ignore:.*created but never used")
def test_signature_argument_errors():
    with pytest.raises(ValueError, match=r"^AXI4 data width must be a multiple of 8 bits, not 12$"):
        axi4_signature(addr_width=32, data_width=12)
    with pytest.raises(ValueError, match=r"^AXI4-Lite data width must be 32 or 64 bits, not 16$"):
        axi4_lite_signature(addr_width=12, data_width=16)
    with pytest.raises(ValueError, match=r"^addr_width 6: the CSR window needs at least 8 address bits$"):
        AxiLiteToCsr(addr_width=6)
    gc.collect()   # the rejected object's UnusedElaboratable warning fires here, under the filter
