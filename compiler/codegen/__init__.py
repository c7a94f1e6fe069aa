"""vtakit.compiler.codegen: IR to VM bytecode (:func:`compile_vm`), host primitives,
memory planning and register allocation."""

from .vm import LoweredPrimitive, VMCompileError, compile_vm

__all__ = ["compile_vm", "LoweredPrimitive", "VMCompileError"]
