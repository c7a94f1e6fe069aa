"""The ISA extension ``"requant2"``: ALU REQ (TFLite's whole requantize in one micro-op,
per-lane RM/RP registers), its legality, its lane function against TFLite's host
requantize, and the fast datapath against the sequential spec."""

import numpy as np
import pytest

from vtakit.hw.config import ConfigError, VTAConfig
from vtakit.hw.fixedpoint import pack_requant_word, requantize_word, unpack_requant_word
from vtakit.hw.isa import AluOp, alu_ops, alu_registers, alu_violation
from vtakit.runtime.hostops.fixed_point import multiply_by_quantized_multiplier, quantize_multiplier
from vtakit.sim import reference
from vtakit.sim.datapath import Counters, Fault, SRAMs

from alu_check import alu_insn

TINY = VTAConfig.preset("tiny")
RQ2 = TINY.replace(extensions=("requant2",))
REQ, RUN, LOAD_M, LOAD_P = int(AluOp.REQ), 0, 1, 2


def test_req_is_legal_only_with_requant2():
    assert [e.name for e in alu_ops(RQ2)] == ["MIN", "MAX", "ADD", "SHR", "REQ"]
    assert alu_registers(RQ2) == ("RM", "RP") and alu_registers(TINY) == ()
    assert alu_registers(TINY.replace(extensions=("requant",))) == ()
    for mode in (RUN, LOAD_M, LOAD_P):
        assert alu_violation(REQ, 0, mode, RQ2) is None
    assert alu_violation(REQ, 0, 3, RQ2) == (
        "REQ imm 3 is out of range; REQ takes a tensor operand (use_imm=0) and an imm field "
        "that is the mode 0..2 (1 loads RM, 2 loads RP, else compute)")
    assert alu_violation(REQ, 1, 0, RQ2).startswith("REQ needs use_imm=0 (a tensor operand)")
    assert "needs the ISA extension 'requant2'" in alu_violation(REQ, 0, 0, TINY)
    assert "needs the ISA extension 'requant2'" in alu_violation(REQ, 0, 0, "requant")
    assert RQ2.name.endswith("+requant2")


def test_requant_and_requant2_are_alternatives():
    with pytest.raises(ConfigError, match=r"requant and requant2 cannot be enabled together: "
                                          r".*pick one"):
        TINY.replace(extensions=("requant", "requant2"))


def test_parameter_word_round_trips_and_refuses_what_does_not_fit():
    rng = np.random.default_rng(0)
    s = rng.integers(-32, 32, 50)
    zp, lo, hi = (rng.integers(-128, 128, 50) for _ in range(3))
    f = unpack_requant_word(pack_requant_word(s, zp, lo, hi, single_rounding=False))
    for name, v in dict(s=s, zp=zp, lo=lo, hi=hi).items():
        np.testing.assert_array_equal(f[name], v)
    assert not f["single"].any()
    word = pack_requant_word([-3, 0], 5, -128, 127, single_rounding=True)
    assert word.dtype == np.int32 and (unpack_requant_word(word)["single"] == 1).all()
    # the layout, bit by bit: s = -3 (0b111101), single (bit 6), zp 5, lo -128, hi 127
    assert int(word[0]) & 0xFFFFFFFF == 0x7F80057D
    for kwargs, message in [(dict(shift=32), "shift=32"), (dict(zero_point=128), "zero_point=128"),
                            (dict(lo=-129), "lo=-129"), (dict(hi=200), "hi=200")]:
        args = dict(shift=0, zero_point=0, lo=-128, hi=127) | kwargs
        with pytest.raises(ValueError, match=f"^REQ parameter {message} does not fit"):
            pack_requant_word(single_rounding=False, **args)
    with pytest.raises(ValueError, match=r"^REQ parameter shift=31 .*legal: -31..30"):
        pack_requant_word(31, 0, -128, 127, single_rounding=True)


@pytest.mark.parametrize("single", [False, True])
def test_req_lane_is_tflite_requantize(single):
    """REQ's lane function against the host's TFLite requantize (per-channel multipliers
    and exponents from real scales, zero point, clip): equal on every value."""
    rng = np.random.default_rng(int(single))
    for trial in range(20):
        channels = 16
        scale = np.exp(rng.uniform(np.log(1e-6), np.log(4.0), channels))
        m, s = quantize_multiplier(scale, single_rounding=single)
        zp = int(rng.integers(-128, 128))
        lo, hi = sorted(int(v) for v in rng.integers(-128, 128, 2))
        word = pack_requant_word(s, zp, lo, hi, single_rounding=single)
        if single:
            # TFLite's single rounding asserts that the result fits int32 (a DCHECK, then a
            # cast); REQ wraps there like MULSHR: compare inside the defined range
            acc = rng.integers(-2**28, 2**28, (64, channels))
        else:
            acc = rng.integers(-2**31, 2**31, (64, channels))
            acc[:4] = np.array([2**31 - 1, -2**31, 0, -1])[:, None]
        bias = rng.integers(-2**20, 2**20, channels)
        x = ((acc + bias + 2**31) % 2**32) - 2**31
        want = np.clip(multiply_by_quantized_multiplier(x, m, s, single_rounding=single) + zp,
                       lo, hi)
        got = requantize_word(x, m, word)
        np.testing.assert_array_equal(got, want, err_msg=f"trial {trial}")


def test_req_lane_on_the_edges():
    """Hand-computed: left shifts wrap, right shifts round half away from zero, s = -32
    acts as 31, SRDHM saturates INT32_MIN * INT32_MIN, lo > hi gives hi, the zero point
    wraps."""
    def req(x, m, s, zp=0, lo=-128, hi=127, single=False):
        return int(requantize_word(x, m, pack_requant_word(s, zp, lo, hi,
                                                           single_rounding=single))[0])
    half = 1 << 30                         # M = 0.5 in Q31
    # gemmlowp's SRDHM: 2.5 -> 3 but -2.5 -> -2; RoundingDivideByPOT: 1.5 -> 2, -1 exact
    assert req(6, half, 0) == 3 and req(5, half, 0) == 3 and req(-5, half, 0) == -2
    assert req(5, half, -1) == 2 and req(-5, half, -1) == -1
    assert req(3, half, 2) == 6                                 # (3 << 2) * 0.5
    assert req(1 << 30, 1 << 30, 2) == 0                        # 2^30 << 2 wraps to 0
    assert req(-2**31, -2**31, 0, hi=127) == 127                # SRDHM saturates
    assert req(1000, 2**31 - 1, -32, lo=-128) == 0              # s=-32: a shift by 31
    assert req(50, half, 0, zp=10, lo=20, hi=-5) == -5          # lo > hi: hi
    assert req(100, half, 0, zp=-20, lo=-128, hi=127) == 30
    # single rounding: (x*M + 2^(k-1)) >> k with k = 31 - s
    assert req(5, half, 0, single=True) == 3 and req(-5, half, 0, single=True) == -2
    assert req(5, half, 1, single=True) == 5


def _random_state(rng, config=RQ2):
    srams = SRAMs(config)
    srams.acc[:] = rng.integers(-2**31, 2**31, srams.acc.shape)
    # parameter rows with sensible exponents, so results are not all clamped
    lanes = srams.acc[0].size
    words = pack_requant_word(rng.integers(-32, 32, lanes), rng.integers(-128, 128, lanes),
                              -128, 127, single_rounding=False)
    words = words | (rng.integers(0, 2, lanes) << 6).astype(np.int32)     # either rounding
    srams.acc[:4] = words.reshape(srams.acc[0].shape)
    isa = srams.isa
    srams.uop[:8] = [isa.encode_uop(int(rng.integers(0, 8)), int(rng.integers(0, 8)))
                     for _ in range(8)]
    for name, reg in srams.alu_regs.items():
        reg[:] = rng.integers(-2**31, 2**31, reg.shape) if name == "RM" else srams.acc[1]
    return srams


def test_datapath_equals_sequential_spec_on_req_programs():
    """Random REQ programs (register loads between computes, repeated destinations,
    chains through written entries) on the fast datapath and the sequential spec: equal
    accumulators, outputs, registers and counters after every instruction."""
    rng = np.random.default_rng(3)
    changed = loaded = 0
    for n in range(40):
        fast, spec = _random_state(np.random.default_rng(n)), _random_state(np.random.default_rng(n))
        for _ in range(6):
            mode = int(rng.choice([RUN, RUN, LOAD_M, LOAD_P]))
            loops = dict(iters=tuple(int(v) for v in rng.integers(1, 4, 2)),
                         dst=tuple(int(v) for v in rng.integers(0, 3, 2)),
                         src=tuple(int(v) for v in rng.integers(0, 3, 2)),
                         uop_end=int(rng.integers(1, 8)))
            insn = alu_insn(RQ2, REQ, use_imm=0, imm=mode, **loops)
            before = fast.acc.copy(), {k: v.copy() for k, v in fast.alu_regs.items()}
            counters = Counters(), Counters()
            fast.alu(insn, counters[0])
            reference.alu(spec, insn, counters[1])
            np.testing.assert_array_equal(fast.acc, spec.acc, err_msg=str(insn))
            np.testing.assert_array_equal(fast.out, spec.out, err_msg=str(insn))
            for k in fast.alu_regs:
                np.testing.assert_array_equal(fast.alu_regs[k], spec.alu_regs[k], err_msg=k)
            assert counters[0] == counters[1]
            if mode == RUN:
                changed += not np.array_equal(fast.acc, before[0])
            else:
                np.testing.assert_array_equal(fast.acc, before[0])     # no SRAM write
                reg = "RM" if mode == LOAD_M else "RP"
                loaded += not np.array_equal(fast.alu_regs[reg], before[1][reg])
    assert changed > 20 and loaded > 20


def test_req_uses_the_registers_as_loaded_and_loads_write_nothing():
    srams = SRAMs(RQ2)
    lanes = srams.acc[0].size
    m = np.full(lanes, 1 << 30, np.int64)
    srams.acc[10] = m.reshape(srams.acc[0].shape)                          # M = 0.5
    srams.acc[11] = pack_requant_word(np.arange(lanes) % 3 - 1, 4, -100, 100,
                                      single_rounding=False).reshape(srams.acc[0].shape)
    srams.acc[12] = 7                                                      # the bias row
    srams.acc[0] = np.arange(lanes).reshape(srams.acc[0].shape) * 10
    out_before = srams.out.copy()
    counters = Counters()
    srams.uop[:2] = [srams.isa.encode_uop(5, 10), srams.isa.encode_uop(5, 11)]
    srams.alu(alu_insn(RQ2, REQ, use_imm=0, imm=LOAD_M), counters)          # uop 0: src 10
    srams.uop[0] = srams.isa.encode_uop(5, 11)
    srams.alu(alu_insn(RQ2, REQ, use_imm=0, imm=LOAD_P), counters)
    np.testing.assert_array_equal(srams.out, out_before)
    np.testing.assert_array_equal(srams.alu_regs["RM"].ravel(), m)
    assert counters["alu_counter"] == 2
    srams.uop[0] = srams.isa.encode_uop(0, 12)
    srams.alu(alu_insn(RQ2, REQ, use_imm=0, imm=RUN), counters)
    x = np.arange(lanes) * 10 + 7
    s = np.arange(lanes) % 3 - 1
    want = np.clip(multiply_by_quantized_multiplier(x, m, s) + 4, -100, 100)
    np.testing.assert_array_equal(srams.acc[0].ravel(), want)
    np.testing.assert_array_equal(srams.out[0].ravel(), want.astype(np.int8))


def test_register_load_faults_like_any_tensor_op():
    """An out-of-range src part way through: the loads before it happened, the fault names
    the index."""
    srams = SRAMs(RQ2)
    depth = RQ2.acc_depth
    srams.acc[depth - 1] = 5
    srams.uop[0] = srams.isa.encode_uop(0, depth - 1)
    insn = alu_insn(RQ2, REQ, use_imm=0, imm=LOAD_M, iters=(1, 3), src=(0, 1))
    counters = Counters()
    with pytest.raises(Fault, match="src_idx"):
        srams.alu(insn, counters)
    assert (srams.alu_regs["RM"] == 5).all() and counters["alu_counter"] == 1
