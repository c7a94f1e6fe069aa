import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from vtakit.hw.config import PRESETS, VTAConfig
from vtakit.hw.isa import AluOp, IsaError, MemType, Opcode, bytes_to_words, insns_to_bytes, isa_for

DEFAULT = isa_for(VTAConfig.preset("default"))


def hilo(hi, lo):
    return (hi << 64) | lo


# Reference section 2.7: (opcode, fields, hi, lo)
WORKED = [
    (Opcode.LOAD, dict(memory_type=MemType.INP, pop_next_dep=1, sram_base=0x10, dram_base=0x100,
                       y_size=3, x_size=5, x_stride=7, y_pad_0=1, y_pad_1=2, x_pad_0=3, x_pad_1=4),
     0x4321000700050003, 0x0000000400004110),
    (Opcode.STORE, dict(memory_type=MemType.OUT, push_prev_dep=1, sram_base=0, dram_base=0x12345,
                        y_size=1, x_size=36, x_stride=36),
     0x0000002400240001, 0x0000048d14000221),
    (Opcode.LOAD, dict(memory_type=MemType.UOP, push_prev_dep=1), 0x0, 0x0000000000000020),
    (Opcode.GEMM, dict(pop_prev_dep=1, uop_bgn=2, uop_end=6, iter_out=4, iter_in=3,
                       dst_factor_out=16, dst_factor_in=1, src_factor_out=18, src_factor_in=1,
                       wgt_factor_out=9, wgt_factor_in=0),
     0x0000900204800810, 0x0006002000c0020a),
    (Opcode.ALU, dict(alu_opcode=AluOp.SHR, use_imm=1, imm=-3, push_next_dep=1, uop_bgn=6,
                      uop_end=7, iter_out=1, iter_in=36, dst_factor_in=1, src_factor_in=1),
     0xfffdb00200000800, 0x0048000800e00644),
    (Opcode.ALU, dict(alu_opcode=AluOp.ADD, uop_bgn=0, uop_end=1, iter_out=2, iter_in=3,
                      dst_factor_out=3, dst_factor_in=1, src_factor_out=3, src_factor_in=1),
     0x0000200200c00803, 0x0006001000200004),
    (Opcode.FINISH, {}, 0x0, 0x0000000000000003),
]


@pytest.mark.parametrize("opcode, fields, hi, lo", WORKED)
def test_worked_encodings(opcode, fields, hi, lo):
    assert DEFAULT.encode(opcode, **fields) == hilo(hi, lo)
    insn = DEFAULT.decode(hilo(hi, lo))
    assert insn.opcode == opcode
    for name, value in insn.fields.items():
        assert value == (int(opcode) if name == "opcode" else fields.get(name, 0)), name


def test_worked_uop():
    assert DEFAULT.encode_uop(5, 3, 2) == 0x00801805
    u = DEFAULT.decode_uop(0x00801805)
    assert (u.dst_idx, u.src_idx, u.wgt_idx) == (5, 3, 2)


def test_default_positions():
    g, a, m = DEFAULT.gemm, DEFAULT.alu, DEFAULT.mem
    assert (g["uop_end"].offset, g["uop_end"].width) == (21, 14)
    assert g["dst_factor_out"].offset == 64 and g["wgt_factor_in"].offset == 118
    assert (a["alu_opcode"].offset, a["use_imm"].offset, a["imm"].offset) == (108, 111, 112)
    assert (m["memory_type"].offset, m["sram_base"].offset, m["dram_base"].offset) == (7, 10, 26)
    assert m["y_size"].offset == 64 and m["x_pad_1"].offset == 124


def test_field_overflow_names_field():
    with pytest.raises(IsaError, match=r"^MEM field sram_base=65536 does not fit in 16 bits"):
        DEFAULT.encode(Opcode.LOAD, sram_base=1 << 16)
    with pytest.raises(IsaError, match=r"^ALU field imm=40000 does not fit in 16 signed bits"):
        DEFAULT.encode(Opcode.ALU, imm=40000)
    with pytest.raises(IsaError, match=r"^GEMM field dst_factor_in=-1 does not fit"):
        DEFAULT.encode(Opcode.GEMM, dst_factor_in=-1)
    with pytest.raises(IsaError, match=r"^GEMM instruction has no field 'imm'"):
        DEFAULT.encode(Opcode.GEMM, imm=1)
    with pytest.raises(IsaError, match=r"^UOP field wgt_idx=1024"):
        DEFAULT.encode_uop(0, 0, 1024)


def test_illegal_opcode_decodes_and_disassembles():
    insn = DEFAULT.decode(5)
    assert insn.opcode == 5 and str(insn).startswith("ILLEGAL opcode=5")
    with pytest.raises(IsaError, match="illegal opcode 6"):
        DEFAULT.format(6)


def test_bytes_roundtrip():
    words = [hilo(hi, lo) for _, _, hi, lo in WORKED]
    data = insns_to_bytes(words)
    assert data[:8] == (0x0000000400004110).to_bytes(8, "little")
    assert bytes_to_words(data, 16) == words


def test_decoded_insn_pickles_and_copies():
    # Dask ships decoded instructions between processes; pickle used to recurse in
    # Insn.__getattr__ (``fields`` unset while the instance is rebuilt)
    import copy
    import pickle
    words = [hilo(hi, lo) for _, _, hi, lo in WORKED]
    for insn in map(DEFAULT.decode, words):
        for back in (pickle.loads(pickle.dumps(insn)), copy.deepcopy(insn)):
            assert (back.opcode, back.word, back.fields) == (insn.opcode, insn.word, insn.fields)
            assert str(back) == str(insn)
    with pytest.raises(AttributeError, match="no_such_field"):
        DEFAULT.decode(words[0]).no_such_field


def test_amaranth_layout_matches_table():
    from amaranth.lib import data
    layout = DEFAULT.gemm.layout()
    assert layout.size == 128
    assert layout["wgt_factor_in"].offset == 118
    assert isinstance(layout, data.FlexibleLayout)
    assert DEFAULT.alu.layout()["imm"].shape.signed


def _values(fmt, draw):
    return {f.name: draw(st.integers(f.min, f.max)) for f in fmt.fields if f.name != "opcode"}


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=60, deadline=None)
@given(data=st.data(), opcode=st.sampled_from(list(Opcode)))
def test_roundtrip_property(preset, data, opcode):
    isa = isa_for(VTAConfig.preset(preset))
    values = _values(isa.format(opcode), data.draw)
    word = isa.encode(opcode, **values)
    assert 0 <= word < 1 << 128
    insn = isa.decode(word)
    assert insn.opcode == opcode
    assert {k: v for k, v in insn.fields.items() if k != "opcode"} == values


@pytest.mark.parametrize("preset", PRESETS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_uop_roundtrip_property(preset, data):
    isa = isa_for(VTAConfig.preset(preset))
    values = _values(isa.uop, data.draw)
    word = isa.encode_uop(**values)
    assert 0 <= word < 1 << 32
    assert isa.decode_uop(word).__dict__ == values
    dec = isa.decode_uops([word, word])
    assert [int(dec[k][1]) for k in ("dst_idx", "src_idx", "wgt_idx")] == list(values.values())
