"""vtakit.compiler: operators and models lowered to VTA kernels."""
