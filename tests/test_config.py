import json

import pytest

from vtakit.hw.config import PRESETS, ConfigError, VTAConfig, config_from_spec, load_config


def test_default_derived():
    c = VTAConfig.preset("default")
    assert c.name == "1x16_i8w8a32_15_15_18_17+overlap"
    assert c.model == "sim_1x16_i8w8a32_15_15_18_17+overlap"
    assert (c.uop_depth, c.inp_depth, c.wgt_depth, c.acc_depth, c.out_depth) == (8192, 2048, 1024, 2048, 2048)
    assert (c.inp_elem_bytes, c.wgt_elem_bytes, c.acc_elem_bytes, c.out_elem_bytes) == (16, 256, 64, 16)
    assert (c.inp_axi_ratio, c.wgt_axi_ratio, c.acc_axi_ratio, c.out_axi_ratio) == (2, 32, 8, 2)
    assert c.bus_width == 64 and c.macs_per_cycle == 256
    assert c.log_out_buff_size == 15
    # the preset is TVM's default VTA with the compute module's ALU lane
    assert c == VTAConfig(compute_overlap=1)


def test_overlap_and_serial_specs():
    """``+overlap`` sets COMPUTE_OVERLAP, ``+serial`` clears it (TVM's VTA, whatever the
    preset or file says); both at once is an error that names them."""
    ov = config_from_spec("default+overlap")
    assert ov == VTAConfig(compute_overlap=1) and ov.name == "1x16_i8w8a32_15_15_18_17+overlap"
    assert config_from_spec("default+serial") == VTAConfig()
    named = {"mine": ov}
    assert config_from_spec("mine+serial", named) == VTAConfig()
    assert config_from_spec("mine+serial+requant", named) == VTAConfig(extensions=("requant",))
    # only the default preset has the lane on (the board presets are TVM's VTA)
    assert [p for p in PRESETS if load_config(p).compute_overlap] == ["default"]
    with pytest.raises(ConfigError, match=r"^config 'default\+overlap\+serial': \+overlap "
                                          r"\(two compute lanes\) and \+serial \(one\) contradict"):
        config_from_spec("default+overlap+serial")


def test_uop_stream_key_and_spec():
    """``+uopstream`` sets UOP_STREAM (a micro-architecture key: the name gains
    ``+uopstream``, the dictionary the key, no preset sets it); bad values name the key."""
    us = config_from_spec("default+requant2+uopstream")
    assert us.uop_stream == 1 and us.compute_overlap == 1 and us.extensions == ("requant2",)
    assert us.name == "1x16_i8w8a32_15_15_18_17+requant2+overlap+uopstream"
    assert us.to_dict()["UOP_STREAM"] == 1 and "UOP_STREAM" not in VTAConfig().to_dict()
    assert VTAConfig.from_dict(us.to_dict()) == us
    assert load_config("tiny+uopstream") == load_config("tiny").replace(uop_stream=1)
    assert config_from_spec("default+uopstream+serial") == VTAConfig(uop_stream=1)
    assert not [p for p in PRESETS if load_config(p).uop_stream]
    for value in (2, -1, True, "1", 1.0):
        with pytest.raises(ConfigError, match=r"^config: UOP_STREAM must be 0 or 1 \(1: the "
                                              r"compute module streams a LOAD UOP"):
            VTAConfig.from_dict({**VTAConfig().to_dict(), "UOP_STREAM": value})
        with pytest.raises(ConfigError, match=r"^UOP_STREAM=.*: must be 0 \(a LOAD UOP holds"):
            VTAConfig(uop_stream=value)


def test_presets():
    assert VTAConfig.preset("ultra96").bus_width == 128
    assert VTAConfig.preset("pynq").bus_width == 64
    c = VTAConfig.preset("4x8")
    assert c.name == "4x8_i8w8a32_15_16_16_18"
    assert (c.batch, c.block_in, c.inp_depth, c.wgt_depth, c.acc_depth) == (4, 8, 2048, 1024, 2048)
    for name in PRESETS:
        assert load_config(name) == VTAConfig.preset(name)


def test_json_roundtrip(tmp_path):
    p = tmp_path / "vta_config.json"
    p.write_text(json.dumps(VTAConfig.preset("4x8").to_dict()))
    assert VTAConfig.from_json(p) == VTAConfig.preset("4x8")


@pytest.mark.parametrize("changes, pattern", [
    ({"LOG_ACC_BUFF_SIZE": 18}, r"^config: LOG_ACC_BUFF_SIZE=18: .*ALU.* 4\*12\+20 = 68 bits > 64"),
    ({"LOG_UOP_BUFF_SIZE": 16}, r"^config: LOG_UOP_BUFF_SIZE=16: .*at most 2\^13 uops"),
    ({"LOG_WGT_BUFF_SIZE": 19}, r"^config: GEMM instruction overflows 128 bits: .*2\*\(11\+11\+11\) = 66"),
    ({"LOG_BLOCK": 2}, r"^config: LOG_BLOCK=2: an input element .* 32 bits is narrower than the 64-bit"),
    ({"TARGET": "vu9p"}, r"^config: TARGET='vu9p': unknown target"),
    ({"HW_VER": "0.0.1"}, r"^config: HW_VER='0.0.1': only the HW_VER 0.0.2 ISA"),
    ({"LOG_INP_WIDTH": 2}, r"^config: LOG_INP_WIDTH=2: vtakit supports 8-bit inputs only"),
    ({"LOG_BATCH": "0"}, r"^config: LOG_BATCH must be an integer, got '0'$"),
    ({"LOG_FOO": 1}, r"^config: unknown key 'LOG_FOO'; valid keys are TARGET, HW_VER"),
    ({"LOG_INP_BUFF_SIZE": 4}, r"^config: LOG_INP_BUFF_SIZE=4: the buffer holds fewer than two"),
])
def test_illegal(changes, pattern):
    values = {**VTAConfig().to_dict(), **changes}
    with pytest.raises(ConfigError, match=pattern):
        VTAConfig.from_dict(values)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match=r"cannot read config file"):
        VTAConfig.from_json(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{ nope")
    with pytest.raises(ConfigError, match=r"invalid JSON at line 1"):
        VTAConfig.from_json(bad)
    with pytest.raises(ConfigError, match=r"unknown preset 'nope'"):
        VTAConfig.preset("nope")
    with pytest.raises(ConfigError, match=r"neither a preset"):
        load_config("nope")


def test_config_from_spec(tmp_path):
    """The benches' NAME+EXT config items (bench/synth.py, bench/costmodel.py)."""
    tiny = load_config("tiny")
    assert config_from_spec("tiny") == tiny
    assert config_from_spec("tiny+requant") == tiny.replace(extensions=("requant",))
    assert config_from_spec("tiny+requant").name == tiny.name + "+requant"
    assert load_config("tiny+requant2") == tiny.replace(extensions=("requant2",))   # the CLI
    mid = tiny.replace(log_uop_buff_size=13)
    assert config_from_spec("mid+requant", {"mid": mid}).extensions == ("requant",)
    assert config_from_spec("mid", {"mid": mid}) is mid
    path = tmp_path / "a+b.json"                    # a file's own name is not split
    path.write_text(json.dumps(tiny.to_dict()))
    assert config_from_spec(str(path)) == tiny
    with pytest.raises(ConfigError, match=r"config 'tiny\+': expected NAME or NAME\+EXT"):
        config_from_spec("tiny+")
    with pytest.raises(ConfigError, match=r"unknown extension 'nope'"):
        config_from_spec("tiny+nope")
    with pytest.raises(ConfigError, match=r"'huge' is neither a preset"):
        config_from_spec("huge+requant")
