// vta_slice<Hi, Lo>(v): bits [Hi:Lo] of a CXXRTL value, read directly from the
// one or two 32-bit chunks that hold them. CXXRTL's own `v.slice<Hi, Lo>().val()`
// first shifts the whole part of `v` above Lo; on the GEMM's 2048-bit weight
// word that made every 8-bit lane cost up to 64 chunk operations (about 95% of
// the default VTA's simulation time). rtl_build rewrites narrow slice reads of
// the generated design into this function; wider slices keep CXXRTL's code.
#pragma once

#include <cxxrtl/cxxrtl.h>

template <size_t Hi, size_t Lo, size_t Bits>
CXXRTL_ALWAYS_INLINE cxxrtl::value<Hi - Lo + 1> vta_slice(const cxxrtl::value<Bits> &v) {
    static_assert(Lo <= Hi && Hi < Bits, "slice out of range");
    constexpr size_t W = Hi - Lo + 1, C = Lo / 32, S = Lo % 32;
    if constexpr (W <= 32) {
        cxxrtl::value<W> r;
        uint32_t x = v.data[C] >> S;
        if constexpr (S != 0 && S + W > 32)
            x |= v.data[C + 1] << (32 - S);
        r.data[0] = x & cxxrtl::value<W>::msb_mask;
        return r;
    } else {
        return v.template slice<Hi, Lo>().val();
    }
}
