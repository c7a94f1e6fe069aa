"""vtakit.boards: FPGA board integration and synthesis reports."""
