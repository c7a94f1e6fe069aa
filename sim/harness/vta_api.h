// The extern "C" API loaded by vtakit.sim.compiled_device with ctypes. An
// adapter source defines `VtaSim` (its port adapter) and includes this file
// once.
#pragma once

#include "vta_harness.h"

using VtaHarness = vta::Harness<VtaSim>;

extern "C" {

// A new simulator instance, reset. `vcd_path` may be null (no waveform).
void *vta_create(int read_latency, const char *vcd_path) {
    return new VtaHarness(read_latency, vcd_path);
}

void vta_destroy(void *handle) { delete static_cast<VtaHarness *>(handle); }

// DRAM bus width in bytes the library was built for (checked by Python).
uint32_t vta_bus_bytes(void) { return VTA_BUS_BYTES; }

// Start a run: `dram` is the device's DRAM image (used in place, not copied).
void vta_start(void *handle, uint8_t *dram, uint64_t dram_len, uint32_t insn_addr,
               uint32_t insn_count) {
    static_cast<VtaHarness *>(handle)->start(dram, dram_len, insn_addr, insn_count);
}

// Simulate up to `budget` cycles of the run (returns a vta::Status); stop after
// `stall_cycles` cycles without progress (0: never).
uint32_t vta_step(void *handle, uint64_t budget, uint64_t max_cycles, uint64_t stall_cycles,
                  vta::RunOut *out) {
    return static_cast<VtaHarness *>(handle)->step(budget, max_cycles, stall_cycles, out);
}

// Fault injection for tests (see Harness::inject): kind 0 off, 1 flip a DRAM write beat.
void vta_inject(void *handle, uint32_t kind, uint64_t beat) {
    static_cast<VtaHarness *>(handle)->inject(kind, beat);
}

}  // extern "C"
