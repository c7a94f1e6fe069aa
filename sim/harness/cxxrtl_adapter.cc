// CXXRTL adapter of the VTA harness. Compiled as one translation unit with the
// generated design (vta_design.cc, top module `vta_top`) so that g++ can
// inline the whole evaluation into the clock loop.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>

#include "vta_fast_slice.h"   // before the design, which calls vta_slice
#include "vta_design.cc"
#include <cxxrtl/cxxrtl_vcd.h>

using Top = cxxrtl_design::p_vta__top;

// Copy between little-endian bytes and CXXRTL values (32-bit chunks, LSB first).
template <size_t Bits>
static inline void load_bytes(cxxrtl::value<Bits> &v, const uint8_t *p) {
    static_assert(Bits % 32 == 0, "bus width must be a multiple of 32 bits");
    std::memcpy(v.data, p, Bits / 8);
}

template <size_t Bits>
static inline void store_bytes(const cxxrtl::value<Bits> &v, uint8_t *p) {
    std::memcpy(p, v.data, Bits / 8);
}

static inline uint64_t get48(const cxxrtl::value<48> &v) {
    return uint64_t(v.data[0]) | uint64_t(v.data[1]) << 32;
}

class VtaSim {
public:
    // The design's inputs are its ports, driven at the start of each cycle.
    static constexpr bool kRegisteredInputs = false;

    explicit VtaSim(const char *vcd_path) {
        if (vcd_path && *vcd_path) {
            vcd_file_.open(vcd_path);
            cxxrtl::debug_items items;
            top_.debug_info(&items, nullptr, "");
            vcd_.reset(new cxxrtl::vcd_writer);
            vcd_->timescale(1, "ns");
            vcd_->add_without_memories(items);
        }
    }

    void set_rst(bool v) { top_.p_rst.set<bool>(v); }
    void set_csr(uint32_t addr, bool w_en, uint32_t w_data) {
        top_.p_csr____addr.set<uint32_t>(addr);
        top_.p_csr____w__en.set<bool>(w_en);
        top_.p_csr____w__data.set<uint32_t>(w_data);
    }
    uint32_t csr_r_data() { return top_.p_csr____r__data.get<uint32_t>(); }
    bool irq() { return top_.p_irq.get<bool>(); }

    bool rd_req_valid() { return top_.p_dram__rd____req____valid.get<bool>(); }
    uint64_t rd_req_payload() { return get48(top_.p_dram__rd____req____payload); }
    void set_rd_req_ready(bool v) { top_.p_dram__rd____req____ready.set<bool>(v); }
    bool rd_data_ready() { return top_.p_dram__rd____data____ready.get<bool>(); }
    void set_rd_data(bool valid, const uint8_t *p) {
        top_.p_dram__rd____data____valid.set<bool>(valid);
        if (p) load_bytes(top_.p_dram__rd____data____payload, p);
    }

    bool wr_req_valid() { return top_.p_dram__wr____req____valid.get<bool>(); }
    uint64_t wr_req_payload() { return get48(top_.p_dram__wr____req____payload); }
    void set_wr_req_ready(bool v) { top_.p_dram__wr____req____ready.set<bool>(v); }
    bool wr_data_valid() { return top_.p_dram__wr____data____valid.get<bool>(); }
    void wr_data(uint8_t *p) { store_bytes(top_.p_dram__wr____data____payload, p); }
    void set_wr_data_ready(bool v) { top_.p_dram__wr____data____ready.set<bool>(v); }

    // Fused edge: without a waveform, one evaluation per cycle. Driving
    // clk 0->1 in a single eval computes the combinational outputs from the
    // current state and the new inputs (this cycle's values, which the harness
    // then reads) and updates the registers on the edge. The top's outputs are
    // unbuffered values written by eval, so they keep this cycle's values
    // after commit. Returns false if eval did not converge in one delta.
    bool fused() const { return !vcd_ && !std::getenv("VTAKIT_CXXRTL_TWO_STEP"); }
    bool edge() {
        top_.prev_p_clk.set<bool>(false);
        top_.p_clk.set<bool>(true);
        bool converged = top_.eval();
        top_.commit();
        return converged;
    }

    // Clock low + settle: outputs reflect the inputs just driven.
    void settle() {
        top_.p_clk.set<bool>(false);
        top_.step();
        sample();
    }
    // Rising edge: registers update (outputs are read only after the next settle).
    void rise() {
        top_.p_clk.set<bool>(true);
        top_.step();
        sample();
    }

    void flush_trace() {
        if (vcd_) {
            vcd_file_ << vcd_->buffer;
            vcd_->buffer.clear();
            vcd_file_.flush();
        }
    }

private:
    void sample() {
        if (vcd_) {
            vcd_->sample(time_++);
            if (vcd_->buffer.size() > (1u << 20)) flush_trace();
        }
    }

    Top top_;
    std::unique_ptr<cxxrtl::vcd_writer> vcd_;
    std::ofstream vcd_file_;
    uint64_t time_ = 0;
};

#include "vta_api.h"
