"""vtakit.boards: FPGA integration: an AXI shell, synthesis and place-and-route reports with
the open tools from PyPI, and board bitstreams."""

from .report import Overflow, SynthReport, format_table, reports_to_json
from .shell import SHELL_STATUS, ShellStatus, VTAShell, shell_verilog
from .synth import synth_config, synthesize
from .targets import RESOURCES, TARGETS, Target, get_target
from .tools import ToolError

__all__ = ["Overflow", "SynthReport", "format_table", "reports_to_json", "SHELL_STATUS",
           "ShellStatus", "VTAShell", "shell_verilog", "synth_config", "synthesize", "RESOURCES",
           "TARGETS", "Target", "get_target", "ToolError"]
