import json
import subprocess
import sys

import numpy as np
import pytest

from vtakit.hw.config import VTAConfig
from vtakit.hw.isa import insns_to_bytes
from vtakit.cli.main import main
from vtakit.runtime.image import DramImage

from test_isa import WORKED, hilo


def test_config_show_default(run_cli, capsys):
    code, out, _ = run_cli("config", "show", "default")
    assert code == 0
    d = json.loads(out)
    assert d["name"] == "1x16_i8w8a32_15_15_18_17+overlap"
    assert (d["uop_depth"], d["inp_depth"], d["wgt_depth"], d["acc_depth"]) == (8192, 2048, 1024, 2048)


def test_config_show_illegal_file(tmp_path):
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps({**VTAConfig().to_dict(), "LOG_ACC_BUFF_SIZE": 18}))
    r = subprocess.run([sys.executable, "-m", "vtakit", "config", "show", str(p)],
                       capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stdout == ""
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "LOG_ACC_BUFF_SIZE=18" in lines[0], r.stderr


def test_disasm_raw(run_cli, tmp_path, capsys):
    p = tmp_path / "prog.bin"
    p.write_bytes(insns_to_bytes([hilo(hi, lo) for _, _, hi, lo in WORKED]))
    code, out, _ = run_cli("disasm", str(p))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == len(WORKED)
    assert lines[0].split(":", 1)[1].split() == [
        "LOAD", "INP", "[pop_next]", "memory_type=2", "sram_base=16", "dram_base=256", "y_size=3",
        "x_size=5", "x_stride=7", "y_pad_0=1", "y_pad_1=2", "x_pad_0=3", "x_pad_1=4"]
    assert "STORE  OUT  [push_prev]" in lines[1] and "dram_base=74565" in lines[1]
    assert lines[2].endswith("; nop")
    assert "GEMM        [pop_prev] reset_reg=0 uop_bgn=2 uop_end=6 iter_out=4 iter_in=3" in lines[3]
    assert "wgt_factor_out=9 wgt_factor_in=0" in lines[3]
    assert "ALU    SHR  [push_next]" in lines[4] and "use_imm=1 imm=-3" in lines[4]
    assert "ALU    ADD  []" in lines[5] and "src_factor_out=3" in lines[5]
    assert lines[6].split(":", 1)[1].split() == ["FINISH", "[]"]


def test_disasm_image(run_cli, tmp_path, capsys):
    words = [hilo(hi, lo) for _, _, hi, lo in WORKED]
    dram = np.zeros(0x3000, dtype=np.uint8)
    dram[0x2000:0x2000 + 16 * 2] = np.frombuffer(insns_to_bytes(words[3:5]), np.uint8)
    DramImage(dram, 0x2000, 2).save(tmp_path / "img.npz")
    code, out, _ = run_cli("disasm", str(tmp_path / "img.npz"))
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and "GEMM" in lines[0] and "ALU    SHR" in lines[1]


@pytest.mark.parametrize("content, msg", [
    (b"\x00" * 17, "not a whole number of 16-byte instructions"),
    (None, "No such file"),
])
def test_disasm_errors(run_cli, tmp_path, capsys, content, msg):
    p = tmp_path / "x.bin"
    if content is not None:
        p.write_bytes(content)
    code, out, err = run_cli("disasm", str(p))
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and msg in err
