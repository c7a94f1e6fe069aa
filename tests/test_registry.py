"""The packed-function registry and runtime modules."""

import numpy as np
import pytest

from vtakit.runtime import (Module, RegistryError, get_global_func, list_global_func_names,
                            register_func, remove_global_func)


@pytest.fixture
def clean():
    names = []
    yield names
    for n in names:
        if get_global_func(n, allow_missing=True) is not None:
            remove_global_func(n)


def test_decorator_and_lookup(clean):
    clean.append("test.reg.add")

    @register_func("test.reg.add")
    def add(a, b):
        return a + b

    f = get_global_func("test.reg.add")
    assert f is add
    np.testing.assert_array_equal(f(np.arange(3), np.ones(3, np.int64)), [1, 2, 3])
    assert "test.reg.add" in list_global_func_names()
    assert list_global_func_names() == sorted(list_global_func_names())


def test_values_of_every_kind(clean):
    clean.append("test.reg.echo")
    register_func("test.reg.echo", lambda *a: a)
    f = get_global_func("test.reg.echo")
    fn = abs
    out = f(np.int8(3), 2, 2.5, "s", (1, (2,)), fn)
    assert out == (np.int8(3), 2, 2.5, "s", (1, (2,)), fn)


def test_bare_decorator_uses_function_name(clean):
    clean.append("my_host_op")

    @register_func
    def my_host_op(x):
        return x

    assert get_global_func("my_host_op") is my_host_op


def test_duplicate_needs_override(clean):
    clean.append("test.reg.dup")
    register_func("test.reg.dup", lambda: 1)
    with pytest.raises(RegistryError, match=r"^function 'test.reg.dup' is already registered; "
                                            r"pass override=True to replace it$"):
        register_func("test.reg.dup", lambda: 2)
    register_func("test.reg.dup", lambda: 3, override=True)
    assert get_global_func("test.reg.dup")() == 3


def test_missing_names_close_matches(clean):
    clean.append("test.reg.conv2d")
    register_func("test.reg.conv2d", lambda: 0)
    assert get_global_func("test.reg.conv2x", allow_missing=True) is None
    with pytest.raises(RegistryError, match=r"^no function registered under 'test.reg.conv2x'; "
                                            r"did you mean 'test.reg.conv2d'\?$"):
        get_global_func("test.reg.conv2x")
    with pytest.raises(RegistryError, match=r"^cannot remove 'test.reg.nope': no function is "
                                            r"registered under it$"):
        remove_global_func("test.reg.nope")


def test_bad_registrations():
    with pytest.raises(RegistryError, match="expected a callable, got int"):
        register_func("test.reg.bad", 3)
    with pytest.raises(RegistryError, match="non-empty string name"):
        register_func("", lambda: 0)
    assert get_global_func("test.reg.bad", allow_missing=True) is None


def test_module_imports():
    host = Module("host", {"relu": lambda x: np.maximum(x, 0)})
    vta = Module("vta", {"conv": lambda x: x})
    root = Module("root", {"relu": lambda x: -x})
    root.import_module(host)
    root.import_module(vta)
    assert root.get_function("relu")(np.array(-2)) == 2      # own function first
    assert root.get_function("conv") is vta.get_function("conv")
    assert root.get_function("conv", query_imports=False, allow_missing=True) is None
    assert root.function_names() == ["relu"]
    with pytest.raises(KeyError, match="module 'root' has no function 'pool'"):
        root.get_function("pool")
