// Verilator adapter of the VTA harness (model class Vvta_top, one per
// instance, each with its own VerilatedContext). Verilator escapes the "__"
// of Amaranth's flattened port names as "___05F". Built with -DVTA_TRACE=1 when
// the model was verilated with --trace (waveforms).
//
// The model is the top inside vtakit.sim.registered_top.RegisteredInputs: its DRAM
// inputs are registered on clk (the harness drives them one cycle ahead), its rst
// and CSR inputs on host_clk, which set_rst/set_csr pulse at once so the design
// sees them without a clk edge, as if they were its ports.
#include <cstring>
#include <memory>

#include "Vvta_top.h"
#include "verilated.h"
#if VTA_TRACE
#include "verilated_vcd_c.h"
#endif

// Copy between little-endian bytes and Verilator port storage.
static inline void load_bytes(QData &v, const uint8_t *p) { std::memcpy(&v, p, sizeof v); }
static inline void store_bytes(const QData &v, uint8_t *p) { std::memcpy(p, &v, sizeof v); }
template <std::size_t N>
static inline void load_bytes(VlWide<N> &v, const uint8_t *p) { std::memcpy(v.data(), p, 4 * N); }
template <std::size_t N>
static inline void store_bytes(const VlWide<N> &v, uint8_t *p) { std::memcpy(p, v.data(), 4 * N); }

class VtaSim {
public:
    explicit VtaSim(const char *vcd_path) : ctx_(new VerilatedContext), top_(new Vvta_top(ctx_.get())) {
#if VTA_TRACE
        if (vcd_path && *vcd_path) {
            ctx_->traceEverOn(true);
            vcd_.reset(new VerilatedVcdC);
            top_->trace(vcd_.get(), 99);
            vcd_->open(vcd_path);
        }
#else
        (void)vcd_path;
#endif
    }
    ~VtaSim() {
#if VTA_TRACE
        if (vcd_) vcd_->close();
#endif
        top_->final();
    }

    static constexpr bool kRegisteredInputs = true;

    void set_rst(bool v) {
        top_->rst = v;
        host_edge();
    }
    void set_csr(uint32_t addr, bool w_en, uint32_t w_data) {
        top_->csr___05Faddr = addr;
        top_->csr___05Fw_en = w_en;
        top_->csr___05Fw_data = w_data;
        host_edge();
    }
    uint32_t csr_r_data() { return top_->csr___05Fr_data; }
    bool irq() { return top_->irq; }

    bool rd_req_valid() { return top_->dram_rd___05Freq___05Fvalid; }
    uint64_t rd_req_payload() { return top_->dram_rd___05Freq___05Fpayload; }
    void set_rd_req_ready(bool v) { top_->dram_rd___05Freq___05Fready = v; }
    bool rd_data_ready() { return top_->dram_rd___05Fdata___05Fready; }
    void set_rd_data(bool valid, const uint8_t *p) {
        top_->dram_rd___05Fdata___05Fvalid = valid;
        if (p) load_bytes(top_->dram_rd___05Fdata___05Fpayload, p);
    }

    bool wr_req_valid() { return top_->dram_wr___05Freq___05Fvalid; }
    uint64_t wr_req_payload() { return top_->dram_wr___05Freq___05Fpayload; }
    void set_wr_req_ready(bool v) { top_->dram_wr___05Freq___05Fready = v; }
    bool wr_data_valid() { return top_->dram_wr___05Fdata___05Fvalid; }
    void wr_data(uint8_t *p) { store_bytes(top_->dram_wr___05Fdata___05Fpayload, p); }
    void set_wr_data_ready(bool v) { top_->dram_wr___05Fdata___05Fready = v; }

    // Verilator settles fully on every eval, so outputs are read between a
    // clk-low and a clk-high evaluation.
    bool fused() const { return false; }
    bool edge() { return true; }

    void settle() {
        top_->clk = 0;
        top_->eval();
        dump();
    }
    void rise() {
        top_->clk = 1;
        top_->eval();
        dump();
    }
    void flush_trace() {
#if VTA_TRACE
        if (vcd_) vcd_->flush();
#endif
    }

private:
    // Latch rst and the CSR inputs into the design's host_clk registers (clk unchanged).
    void host_edge() {
        top_->host_clk = 0;
        top_->eval();
        top_->host_clk = 1;
        top_->eval();
    }

    void dump() {
#if VTA_TRACE
        if (vcd_) vcd_->dump(time_++);
#endif
    }

    std::unique_ptr<VerilatedContext> ctx_;
    std::unique_ptr<Vvta_top> top_;
#if VTA_TRACE
    std::unique_ptr<VerilatedVcdC> vcd_;
    uint64_t time_ = 0;
#endif
};

#include "vta_api.h"
