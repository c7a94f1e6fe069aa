// Simulator-independent test harness of the VTA top level: the clock loop,
// the DRAM model and the CSR protocol. One adapter per simulator (CXXRTL,
// Verilator) gives it access to the top-level ports; see cxxrtl_adapter.cc and
// verilator_adapter.cc. The C API that Python loads with ctypes is in
// vta_api.h. Nothing here runs per cycle in Python.
//
// DRAM model (the protocol of vtakit.hw.interfaces; the same timing as
// vtakit.sim.pysim.DramPortModel, so cycle counts agree with the pysim backend):
//   read:  a request is accepted every cycle; requests are served one at a
//          time, in order. A request's first data beat is valid
//          `read_latency` cycles after its handshake (or as soon as the
//          previous request's last beat has gone), then one beat per cycle
//          while the design is ready.
//   write: a request is accepted while fewer than 1 + VTA_WRITE_AHEAD accepted
//          requests have beats left (request-ahead: the next burst's request is
//          taken while the current one's beats stream); the beats go to the
//          requests in order, from the cycle after the request's handshake, and
//          each is committed to DRAM on its handshake.
// Inputs never depend combinationally on outputs in the same cycle, so one
// settle per clock phase is enough.
//
// Two ways to drive a cycle, chosen by the adapter (Sim::kRegisteredInputs):
//   direct (CXXRTL): drive this cycle's inputs, settle (or a fused edge), sample
//     the handshakes, clock.
//   registered (Verilator, sim/registered_top.py): the design's DRAM inputs are
//     registered on clk, so its outputs are already settled when a cycle begins;
//     sample the handshakes, update the DRAM model, drive the inputs of the next
//     cycle, clock. The design sees the same inputs in the same cycles, and no
//     logic of the design depends combinationally on a top-level input (which
//     Verilator would re-evaluate on every eval).
//
// No-progress watch (a deadlock is reported as STALLED instead of running to
// max_cycles): every SAMPLE_CYCLES cycles without DRAM traffic, the harness
// reads the CSRs of VTA_WATCH_REGS (unit counters, micro-op count, unit state,
// queue levels); a run in which neither DRAM traffic nor any of them changed for
// `stall_cycles` cycles stops. A pending DRAM read or write burst counts as
// progress, so a long read latency or burst is never taken for a deadlock.
// Reading a CSR only changes the combinational read port, never the state, so
// cycle counts are the same with and without the watch.
//
// The register offsets come from vtakit.hw.spec.Reg through -D flags
// (vtakit.sim.rtl_build.harness_defines), not from this file.
#pragma once

#include <cstdint>
#include <cstring>
#include <deque>

#if !defined(VTA_BUS_BYTES) || !defined(VTA_REG_CTRL) || !defined(VTA_REG_INSN_COUNT) || \
    !defined(VTA_REG_INSN_ADDR) || !defined(VTA_WATCH_REGS) || !defined(VTA_WRITE_AHEAD)
#error "compile with the -D flags of vtakit.sim.rtl_build.harness_defines"
#endif

namespace vta {

enum Status : uint32_t {
    RUNNING = 0,      // the chunk's cycle budget ran out; call step again
    DONE = 1,         // the design set done (CTRL bit 1); maybe with error (bit 2)
    TIMEOUT = 2,      // max_cycles simulated without done
    DRAM_FAULT = 3,   // a DRAM access outside [0, dram_len)
    PROTOCOL = 4,     // an unaligned address or a zero-beat burst
    NOT_CONVERGED = 5,  // a fused edge needed more than one delta cycle (combinational feedback)
    STALLED = 6,      // nothing moved for stall_cycles cycles: a deadlock
};

// Mirrored by ctypes in vtakit/sim/compiled_device.py: keep the layouts equal.
struct RunOut {
    uint64_t cycles;       // clock cycles since the start of the run
    uint32_t status;       // Status
    uint32_t regs[16];     // CSR values at byte offsets 0, 4, ... 0x3c, read when the run ended
    uint64_t fault_addr;   // DRAM_FAULT / PROTOCOL: the request's byte address
    uint64_t fault_bytes;  // and its length in bytes
    uint32_t fault_write;  // 1 when the faulting request was a write
    uint32_t fault_beats;  // the request's beat count
};

enum Reg : uint32_t { CTRL = VTA_REG_CTRL, INSN_COUNT = VTA_REG_INSN_COUNT,
                      INSN_ADDR = VTA_REG_INSN_ADDR };
static constexpr uint32_t WATCH_REGS[] = {VTA_WATCH_REGS};
static constexpr unsigned NUM_WATCH = sizeof WATCH_REGS / sizeof WATCH_REGS[0];
static constexpr uint64_t SAMPLE_CYCLES = 256;

template <class Sim>
class Harness {
public:
    explicit Harness(int read_latency, const char *vcd_path)
        : sim_(vcd_path), read_latency_(read_latency < 1 ? 1 : read_latency) {
        reset();
    }

    // Write INSN_COUNT, INSN_ADDR and CTRL.start, one CSR write per cycle.
    void start(uint8_t *dram, uint64_t dram_len, uint32_t insn_addr, uint32_t insn_count) {
        if (needs_reset_)
            reset();
        dram_ = dram;
        dram_len_ = dram_len;
        reads_.clear();
        writes_.clear();
        drive_idle();
        cycles_ = 0;
        last_move_ = 0;
        dram_moved_ = false;
        for (unsigned i = 0; i < NUM_WATCH; i++)
            watch_[i] = ~0u;   // the first sample always counts as a change
        csr_write(INSN_COUNT, insn_count);
        csr_write(INSN_ADDR, insn_addr);
        if (Sim::kRegisteredInputs)
            drive(1);   // latched at the edge of the start write: the inputs of cycle 1
        csr_write(CTRL, 1);
        needs_reset_ = true;  // cleared when the run ends cleanly
        wr_beats_ = 0;
    }

    // Fault injection (a deliberately broken backend, for testing the differential
    // fuzzer): kind 1 flips bit 0 of the first byte of DRAM write beat `beat`
    // (counted from 0 in every run); kind 0 turns injection off.
    void inject(uint32_t kind, uint64_t beat) {
        inject_kind_ = kind;
        inject_beat_ = beat;
    }

    // Simulate at most `budget` cycles; stop early at done, at `max_cycles`, or
    // after `stall_cycles` cycles without progress (0: never).
    uint32_t step(uint64_t budget, uint64_t max_cycles, uint64_t stall_cycles, RunOut *out) {
        uint32_t status = RUNNING;
        for (uint64_t n = 0; n < budget; n++) {
            if (cycles_ >= max_cycles) { status = TIMEOUT; break; }
            status = cycle(out);
            if (status != RUNNING) break;
            if (stall_cycles && cycles_ % SAMPLE_CYCLES == 0 && stalled(stall_cycles)) {
                status = STALLED;
                break;
            }
        }
        out->cycles = cycles_;
        out->status = status;
        if (status != RUNNING) {
            for (uint32_t i = 0; i < 16; i++)
                out->regs[i] = csr_read(4 * i);
            sim_.set_csr(CTRL, false, 0);
            sim_.settle();
            // After a clean done the design is idle and keeps its SRAMs; after
            // anything else it is reset before the next run.
            needs_reset_ = !(status == DONE && !(out->regs[0] & 4));
        }
        sim_.flush_trace();
        return status;
    }

private:
    static constexpr uint32_t B = VTA_BUS_BYTES;

    void reset() {
        sim_.set_rst(true);
        drive_idle();
        for (int i = 0; i < 2; i++) {
            sim_.settle();
            sim_.rise();
        }
        sim_.set_rst(false);
        sim_.settle();
        needs_reset_ = false;
    }

    void drive_idle() {
        sim_.set_csr(CTRL, false, 0);
        sim_.set_rd_req_ready(false);
        sim_.set_rd_data(false, nullptr);
        rd_valid_ = false;
        sim_.set_wr_req_ready(false);
        sim_.set_wr_data_ready(false);
    }

    void csr_write(uint32_t addr, uint32_t value) {
        sim_.set_csr(addr, true, value);
        sim_.settle();
        sim_.rise();
        sim_.set_csr(CTRL, false, 0);
    }

    uint32_t csr_read(uint32_t addr) {
        sim_.set_csr(addr, false, 0);
        sim_.settle();
        return sim_.csr_r_data();
    }

    // The no-progress watch (see the top of this file).
    bool stalled(uint64_t stall_cycles) {
        bool moved = dram_moved_ || !reads_.empty() || !writes_.empty();
        dram_moved_ = false;
        if (!moved) {
            for (unsigned i = 0; i < NUM_WATCH; i++) {
                uint32_t v = csr_read(WATCH_REGS[i]);
                moved |= v != watch_[i];
                watch_[i] = v;
            }
            sim_.set_csr(CTRL, false, 0);
        }
        if (moved)
            last_move_ = cycles_;
        return cycles_ - last_move_ >= stall_cycles;
    }

    uint32_t fault(RunOut *out, uint32_t status, uint64_t addr, uint32_t beats, bool write) {
        out->fault_addr = addr;
        out->fault_beats = beats;
        out->fault_bytes = uint64_t(beats) * B;
        out->fault_write = write;
        return status;
    }

    uint32_t check(RunOut *out, uint64_t payload, bool write) {
        uint64_t addr = payload & 0xFFFFFFFFu, beats = (payload >> 32) & 0xFFFFu;
        if (beats == 0 || addr % B)
            return fault(out, PROTOCOL, addr, uint32_t(beats), write);
        if (addr + beats * B > dram_len_)
            return fault(out, DRAM_FAULT, addr, uint32_t(beats), write);
        return RUNNING;
    }

    // The DRAM model's inputs in cycle `now` (a function of its state only).
    void drive(uint64_t now) {
        rd_valid_ = !reads_.empty() && reads_.front().due <= now;
        sim_.set_rd_req_ready(true);
        sim_.set_rd_data(rd_valid_, rd_valid_ ? dram_ + reads_.front().addr : nullptr);
        sim_.set_wr_req_ready(writes_.size() <= VTA_WRITE_AHEAD);
        sim_.set_wr_data_ready(!writes_.empty());
    }

    // One clock cycle (see the top of this file): the design's outputs with this
    // cycle's inputs, the handshakes sampled before the edge, the edge, the DRAM model
    // updated.
    uint32_t cycle(RunOut *out) {
        uint64_t now = cycles_ + 1;   // this cycle's number (the first after start is 1)
        // Either settle and read this cycle's outputs, then clock; or (a fused
        // edge, CXXRTL) one evaluation that both shows this cycle's outputs and
        // clocks the design; or (registered inputs) the outputs settled at the end of
        // the previous cycle. Either way the handshakes below are the ones the
        // design saw before its edge.
        bool fused = sim_.fused();
        if (!Sim::kRegisteredInputs) {
            drive(now);
            if (fused) {
                if (!sim_.edge()) return NOT_CONVERGED;
            } else {
                sim_.settle();
            }
        }
        if (sim_.irq())
            return DONE;   // fused: one extra edge in the idle done state, which changes nothing

        bool rd_req = sim_.rd_req_valid();
        bool rd_beat = rd_valid_ && sim_.rd_data_ready();
        bool wr_req = writes_.size() <= VTA_WRITE_AHEAD && sim_.wr_req_valid();
        bool wr_beat = !writes_.empty() && sim_.wr_data_valid();
        dram_moved_ |= rd_req | rd_beat | wr_req | wr_beat;
        uint64_t rd_payload = rd_req ? sim_.rd_req_payload() : 0;
        uint64_t wr_payload = wr_req ? sim_.wr_req_payload() : 0;
        if (wr_beat) {  // committed on the handshake: visible to reads from the next cycle
            Write &w = writes_.front();
            sim_.wr_data(dram_ + w.addr);
            if (inject_kind_ == 1 && wr_beats_ == inject_beat_)
                dram_[w.addr] ^= 1;
            wr_beats_++;
            w.addr += B;
            if (--w.left == 0) writes_.pop_front();
        }
        if (!Sim::kRegisteredInputs && !fused) sim_.rise();
        cycles_++;

        uint32_t status = RUNNING;
        if (rd_beat) {
            Read &r = reads_.front();
            r.addr += B;
            if (--r.left == 0) reads_.pop_front();
        }
        if (rd_req && !(status = check(out, rd_payload, false)))
            reads_.push_back(Read{now + read_latency_, rd_payload & 0xFFFFFFFFu,
                                  uint32_t(rd_payload >> 32) & 0xFFFFu});
        if (wr_req && !status && !(status = check(out, wr_payload, true)))
            writes_.push_back(Write{wr_payload & 0xFFFFFFFFu,
                                    uint32_t(wr_payload >> 32) & 0xFFFFu});
        if (Sim::kRegisteredInputs) {
            drive(now + 1);
            sim_.settle();
            sim_.rise();
        }
        return status;
    }

    struct Read {
        uint64_t due;   // first cycle its data may be valid
        uint64_t addr;  // byte address of the next beat
        uint32_t left;  // beats still to send
    };

    Sim sim_;
    int read_latency_;
    bool needs_reset_ = false;
    uint8_t *dram_ = nullptr;
    uint64_t dram_len_ = 0, cycles_ = 0;
    uint64_t last_move_ = 0;       // the last sampled cycle at which something moved
    bool dram_moved_ = false;      // DRAM traffic since the last sample
    uint32_t watch_[NUM_WATCH];    // the watched CSRs at the last sample
    struct Write {
        uint64_t addr;  // byte address of the next beat
        uint32_t left;  // beats still to receive
    };

    std::deque<Read> reads_;
    bool rd_valid_ = false;        // the read data valid input driven for this cycle
    std::deque<Write> writes_;     // accepted write requests with beats to receive
    uint32_t inject_kind_ = 0;
    uint64_t inject_beat_ = 0, wr_beats_ = 0;
};

}  // namespace vta
