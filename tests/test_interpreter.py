"""Differential tests for the concrete interpreter: every snippet runs in our VM and in CPython.

byterun's habit (``tests/vmtest.py: assert_ok``): the same function, the same
arguments, compared result by result, or exception type and message by message.
"""

from __future__ import annotations

import copy
import dis
import functools
import math
import textwrap
import types

import pytest
from hypothesis import given, settings, strategies as st

from minidynamo.interpreter import UnsupportedInstructionError, VirtualMachine

pytestmark = pytest.mark.ch02


def _outcome(call):
    try:
        return ("ok", call())
    except Exception as exc:  # noqa: BLE001 - the exception is the result being compared
        return ("raise", type(exc), str(exc))


def assert_same_as_eager(fn, *args, **kwargs):
    """Run fn in our VM and in CPython on copies of the arguments; compare results, exceptions, mutations."""
    eager_args, eager_kwargs = copy.deepcopy((args, kwargs))
    vm_args, vm_kwargs = copy.deepcopy((args, kwargs))
    expected = _outcome(lambda: fn(*eager_args, **eager_kwargs))
    vm = VirtualMachine()
    got = _outcome(lambda: vm.run(fn, *vm_args, **vm_kwargs))
    assert got == expected, f"{fn.__name__}: VM gave {got!r}, CPython gave {expected!r}"
    if expected[0] == "ok":
        assert type(got[1]) is type(expected[1])
    assert (vm_args, vm_kwargs) == (eager_args, eager_kwargs), "argument mutations differ"
    assert vm.instructions_executed > 0
    return vm


# ---------------------------------------------------------------------------------------------
# The corpus: each case is (function, args). Grouped like the interpreter's sections.
# ---------------------------------------------------------------------------------------------

CASES: list[tuple] = []


def case(*args, **kwargs):
    def register(fn):
        CASES.append(pytest.param(fn, args, kwargs, id=f"{fn.__name__}{len(CASES)}"))
        return fn

    return register


SCALE = 3
COUNTER = [0]


# ## Arithmetic, comparisons, boolean operators
@case(7, 3)
@case(-7, 3)
@case(7.5, 2)
def arith(a, b):
    return a + b, a - b, a * b, a / b, a // b, a % b, a**2, -a, +a, abs(a)


@case(0b1100, 0b1010)
def bits(a, b):
    return a & b, a | b, a ^ b, ~a, a << 2, a >> 1


@case(5, 0)
def zero_division(a, b):
    return a / b


@case(3, 4)
@case(4, 4)
def comparisons(a, b):
    return a < b, a <= b, a == b, a != b, a > b, a >= b, 1 < a < b, a < b > 10


@case(0, 5)
@case(2, 0)
@case(None, "")
def bool_ops(a, b):
    return a and b, a or b, not a, (a or b) and "x", a if b else b


@case(3)
def inplace(a):
    a += 2
    a *= 3
    a -= 1
    a //= 2
    a **= 2
    a %= 7
    a <<= 3
    a |= 1
    return a


@case([1, 2], [1, 2])
@case(None, None)
def identity(a, b):
    return a is b, a is not b, a == b, a is None, b is not None


@case(3, [1, 2, 3])
@case("x", "abc")
def membership(a, b):
    return a in b, a not in b


@case("a", 2)
def type_error_add(a, b):
    return a + b


@case(2, 3)
def matmul_pow(a, b):
    return pow(a, b), a**-1, divmod(b, a), round(b / a, 3)


# ## Names: locals, globals, closures, cells
@case(2)
def uses_global(x):
    return x * SCALE


@case(2)
def missing_global(x):
    return x + NOT_DEFINED  # noqa: F821


@case()
def writes_global():
    global SCALE_COPY
    SCALE_COPY = SCALE + 1
    return SCALE_COPY


@case(5)
def closure(x):
    def inner(y):
        return x + y

    return inner(1), inner(2)


@case(3)
def nonlocal_counter(n):
    count = 0

    def bump():
        nonlocal count
        count += 1

    for _ in range(n):
        bump()
    return count


@case(1)
def closure_arg_cell(x):
    f = lambda: x * 10  # noqa: E731
    x = 4
    return f()


@case(3)
def nested_closures(a):
    def outer(b):
        def inner(c):
            return a + b + c

        return inner

    return outer(10)(100)


@case()
def unbound_local():
    if False:
        y = 1
    return y  # noqa: F821


@case()
def unbound_free():
    def inner():
        return v

    r = inner
    try:
        r()
    except NameError as e:
        return str(e)
    v = 1  # noqa: F841


@case(4)
def delete_local(x):
    y = x
    del y
    try:
        return y  # noqa: F821
    except UnboundLocalError as e:
        return str(e)


@case(2)
def locals_shadow(x):
    len = lambda s: 42  # noqa: E731
    return len("abc") + x


# ## Attributes
class Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def norm1(self):
        return abs(self.x) + abs(self.y)

    def scaled(self, k=2):
        return Point(self.x * k, self.y * k)

    @property
    def swapped(self):
        return (self.y, self.x)

    @staticmethod
    def origin():
        return Point(0, 0)

    @classmethod
    def name(cls):
        return cls.__name__

    def __eq__(self, other):
        return type(other) is type(self) and vars(self) == vars(other)


class Point3(Point):
    def __init__(self, x, y, z):
        super().__init__(x, y)
        self.z = z

    def norm1(self):
        return super().norm1() + abs(self.z)


@case(Point(1, -2))
def attrs(p):
    p.z = p.x + p.y
    return p.x, p.z, p.norm1(), p.scaled().x, p.scaled(k=3).y, p.swapped, Point.origin().x, p.name()


@case(Point(1, 2))
def del_attr(p):
    del p.x
    return hasattr(p, "x")


@case(Point(1, 2))
def missing_attr(p):
    return p.nope


@case()
def super_call():
    p = Point3(1, -2, 3)
    return p.norm1(), p.z


@case("Hello World")
def str_methods(s):
    return s.lower(), s.split(), s.replace("o", "0"), s.startswith("He"), "-".join(s.split()), s[::-1]


# ## Containers, subscripts, slices
@case(1, 2, 3)
def build(a, b, c):
    return (a, b, c), [a, b, c], {a, b, c}, {"a": a, "b": b}, {a: b, b: c}, (), [], {}


@case([1, 2, 3, 4, 5])
def slices(xs):
    return xs[1:3], xs[::2], xs[-2:], xs[:-1], xs[::-1], xs[1:4:2]


@case([1, 2, 3, 4, 5])
def store_slices(xs):
    xs[1:3] = [9, 9, 9]
    del xs[0]
    xs[-1] = 0
    return xs


@case({"a": 1})
def dict_ops(d):
    d["b"] = 2
    d.update(c=3)
    del d["a"]
    return d, d.get("a"), d.get("b"), list(d.items()), list(d.keys()), list(d.values()), d.pop("c")


@case({"a": 1}, "z")
def key_error(d, k):
    return d[k]


@case([1, 2, 3])
def list_methods(xs):
    xs.append(4)
    xs.extend([5, 6])
    xs.insert(0, 0)
    y = xs.pop()
    return xs, y, xs.index(3), xs.count(1), sorted(xs, reverse=True)


@case([3, 1, 2])
def index_error(xs):
    return xs[10]


@case([1, 2], (3, 4), {5})
def star_build(a, b, c):
    return [*a, *b], (*a, 0, *b), {*a, *c}, {**{"x": 1}, "y": 2, **{"x": 3}}


@case(5)
def star_non_iterable(a):
    return [*a]


@case([[1, 2], [3, 4]])
def nested_subscript(m):
    m[0][1] = m[1][0] * 10
    return m, m[1][-1]


# ## Unpacking
@case((1, 2, 3))
def unpack(t):
    a, b, c = t
    (d, e), f = (a, b), c
    return a + b + c, d, e, f


@case([1, 2, 3, 4, 5])
def unpack_star(xs):
    a, *b, c = xs
    *d, e = xs
    f, *g = xs
    return a, b, c, d, e, f, g


@case((1, 2))
def unpack_too_few(t):
    a, b, c = t
    return a


@case((1, 2, 3))
def unpack_too_many(t):
    a, b = t
    return a


@case(5)
def unpack_non_iterable(x):
    a, b = x
    return a


@case([1])
def unpack_star_too_few(xs):
    a, *b, c = xs
    return b


@case("ab")
def swap(s):
    a, b = s
    a, b = b, a
    a, b, c = b, a, a
    return a + b + c


# ## Control flow
@case(5)
@case(-5)
@case(0)
def if_elif(x):
    if x > 0:
        return "pos"
    elif x < 0:
        return "neg"
    else:
        return "zero"


@case(10)
def while_loop(n):
    i, total = 0, 0
    while i < n:
        i += 1
        if i % 3 == 0:
            continue
        if i > 8:
            break
        total += i
    else:
        total = -1
    return total


@case(4)
def while_else(n):
    while n > 0:
        n -= 1
    else:
        n = "done"
    return n


@case([3, 1, 4, 1, 5])
def for_loops(xs):
    out = []
    for i, x in enumerate(xs):
        if x == 4:
            continue
        out.append(i * x)
    for a, b in zip(xs, xs[1:]):
        out.append(a - b)
    for k, v in {"a": 1, "b": 2}.items():
        out.append(k * v)
    for x in xs:
        if x > 4:
            break
    else:
        out.append("no break")
    return out


@case(4)
def nested_loops(n):
    pairs = []
    for i in range(n):
        for j in range(i):
            if (i + j) % 2:
                pairs.append((i, j))
    return pairs


@case(6)
def ternary_chain(n):
    return ["fizz" if i % 3 == 0 else "buzz" if i % 5 == 0 else i for i in range(1, n)]


@case(None)
@case(3)
def none_checks(x):
    if x is None:
        return "none"
    if x is not None:
        return x + 1


# ## Comprehensions
@case(5)
def comprehensions(n):
    return (
        [i * i for i in range(n)],
        {i % 3 for i in range(n)},
        {i: str(i) for i in range(n) if i % 2},
        [(i, j) for i in range(3) for j in range(i)],
        sum(i for i in range(n)),
    )


@case(3)
def comprehension_closure(k):
    fns = [lambda x, i=i: x + i * k for i in range(3)]
    return [f(1) for f in fns]


# ## Calls
def helper(a, b=2, *args, c=3, d, **kwargs):
    return a, b, args, c, d, kwargs


def posonly(a, /, b, *, c):
    return a, b, c


@case()
def call_kinds():
    return (
        helper(1, d=4),
        helper(1, 2, 3, 4, d=5, e=6),
        helper(*[1, 2, 3], **{"d": 4, "z": 0}),
        helper(a=1, d=2),
        posonly(1, b=2, c=3),
        posonly(1, 2, c=3),
    )


@case()
def call_missing_arg():
    return helper(1)


@case()
def call_too_many():
    return posonly(1, 2, 3, c=4)


@case()
def call_unexpected_kw():
    return posonly(1, 2, c=3, e=4)


@case()
def call_duplicate_kw():
    return helper(1, a=2, d=3)


@case()
def call_posonly_as_kw():
    return posonly(a=1, b=2, c=3)


@case()
def call_double_star_dup():
    return helper(1, **{"d": 1}, **{"d": 2})


@case(Point(1, 2), [3])
def star_method_call(p, ks):
    return p.scaled(*ks).x, Point.scaled(p, **{"k": 4}).y, max(*ks, *[0])


@case([1, 2])
def star_arg_not_iterable(xs):
    return helper(*5)


@case([1, 2])
def double_star_not_mapping(xs):
    return helper(1, **xs)


@case(4)
def recursion(n):
    def fact(k):
        return 1 if k <= 1 else k * fact(k - 1)

    return fact(n)


@case(10)
def fib(n):
    def f(k):
        return k if k < 2 else f(k - 1) + f(k - 2)

    return f(n)


@case(3)
def lambdas(x):
    add = lambda a, b=1: a + b  # noqa: E731
    return add(x), add(x, 5), (lambda *a: len(a))(1, 2, 3), (lambda **k: sorted(k))(b=1, a=2)


@case([3, 1, 2])
def builtins_calls(xs):
    return len(xs), max(xs), min(xs), sum(xs), sorted(xs), list(reversed(xs)), any(xs), all(xs), isinstance(xs, list)


@case([3, 1, 2])
def callbacks_from_c(xs):
    return sorted(xs, key=lambda v: -v), list(map(lambda v: v * 2, xs)), list(filter(None, [0, *xs]))


@case(2)
def decorators(x):
    def twice(fn):
        @functools.wraps(fn)
        def wrapper(*a, **k):
            return fn(fn(*a, **k))

        return wrapper

    @twice
    def inc(v):
        return v + 1

    return inc(x), inc.__name__


@case(1)
def kwonly_defaults(x):
    def f(a, *, b=10, c):
        return a + b + c

    return f(x, c=1), f(x, b=0, c=2)


@case()
def annotations_kept():
    def f(a: int, b: "str" = "x") -> list:
        return [a, b]

    return f(1), f.__annotations__


@case(Point(1, 2))
def bound_method_object(p):
    m = p.norm1
    return m(), getattr(p, "scaled")(3).y


@case(3)
def generators_basic(n):
    def gen(k):
        for i in range(k):
            yield i * 2

    return list(gen(n)), sum(x for x in range(n))


def _numbers(n):
    try:
        for i in range(n):
            got = yield i
            if got:
                yield ("got", got)
        result = yield from _sub()
        yield result
    finally:
        COUNTER.append("finally")


def _sub():
    yield "sub"
    return "sub-result"


@case(3)
def generator_send_and_yield_from(n):
    gen = _numbers(n)
    out = [next(gen), gen.send("hi"), next(gen), next(gen), next(gen), next(gen)]
    gen.close()
    return out, list(_numbers(2)), gen.__name__


@case()
def generator_throw():
    def gen():
        try:
            yield 1
        except ValueError as e:
            yield f"caught {e}"
        yield 3

    g = gen()
    return next(g), g.throw(ValueError("boom")), next(g), list(g)


@case()
def generator_throw_uncaught():
    def gen():
        yield 1

    g = gen()
    next(g)
    g.throw(KeyError("k"))


@case()
def generator_stopiteration_becomes_runtimeerror():
    def gen():
        yield 1
        raise StopIteration

    return list(gen())


@case()
def generator_return_value():
    def gen():
        yield 1
        return "done"

    g = gen()
    next(g)
    try:
        next(g)
    except StopIteration as stop:
        return stop.value


@case(4)
def generator_pipeline(n):
    evens = (i for i in range(n * 3) if i % 2 == 0)
    squares = (e * e for e in evens)
    return list(zip(squares, "abcdef")), any(x > 10 for x in range(n)), dict((i, -i) for i in range(n))


@case(9.0)
def local_imports(x):
    import math as m
    from collections import OrderedDict
    from os import path

    import os.path

    return m.sqrt(x), list(OrderedDict(a=1)), path.basename("/a/b"), os.path.join("a", "b")


@case()
def import_missing_name():
    from os import does_not_exist  # noqa: F401


@case()
def math_module():
    return math.sqrt(16.0), math.floor(2.7), math.pi > 3


# ## Strings
@case(3.14159, "pi", 42)
def fstrings(x, name, n):
    return f"{name}={x:.2f}", f"{name!r}", f"{n:>5}|{n:<3}|", f"{x!s:>{n // 10}}", f"{{literal}} {n + 1}"


@case("abc")
def string_ops(s):
    return s * 2, s + "d", s[1], s.upper(), "%s-%d" % (s, 3), "{}!".format(s)


# ## Exceptions
@case(0)
@case(2)
def try_except(d):
    try:
        r = 10 / d
    except ZeroDivisionError as e:
        r = str(e)
    return r


@case(1)
def try_finally(x):
    log = []
    try:
        log.append("body")
        return log
    finally:
        log.append("finally")


@case("k")
@case(0)
@case(None)
def multiple_handlers(k):
    try:
        return {"a": 1}[k] if isinstance(k, str) else 1 / k if k is not None else k.nope
    except KeyError as e:
        return "key", str(e)
    except (ZeroDivisionError, TypeError) as e:
        return "arith", type(e).__name__
    except Exception as e:
        return "other", type(e).__name__


@case(1)
def try_else_finally(x):
    out = []
    try:
        out.append(1)
    except ValueError:
        out.append(2)
    else:
        out.append(3)
    finally:
        out.append(4)
    return out


@case(3)
def raise_and_catch(x):
    try:
        raise ValueError(f"bad {x}")
    except ValueError as e:
        return e.args


@case(3)
def raise_uncaught(x):
    raise KeyError(x)


@case()
def raise_class():
    raise IndexError


@case()
def raise_non_exception():
    raise 3


@case()
def bare_reraise():
    try:
        try:
            1 / 0
        except ZeroDivisionError:
            raise
    except ZeroDivisionError as e:
        return "reraised", str(e)


@case()
def raise_from():
    try:
        try:
            {}["x"]
        except KeyError as e:
            raise ValueError("wrapped") from e
    except ValueError as e:
        return type(e.__cause__).__name__, e.__suppress_context__


@case()
def implicit_context():
    try:
        try:
            1 / 0
        except ZeroDivisionError:
            [][1]
    except IndexError as e:
        return type(e.__context__).__name__


@case()
def nested_try_loops():
    out = []
    for i in range(4):
        try:
            if i == 1:
                continue
            if i == 3:
                break
            out.append(i)
        finally:
            out.append(-i)
    return out


@case(5)
def assert_fails(x):
    assert x < 3, f"too big: {x}"
    return x


@case(1)
def assert_passes(x):
    assert x < 3
    return x


@case()
def exception_in_callee():
    def bad():
        return 1 / 0

    try:
        bad()
    except ZeroDivisionError:
        return "caught across frames"


@case()
def catch_non_exception_class():
    try:
        1 / 0
    except int:
        return 1


@case()
def finally_overrides_return():
    try:
        return 1
    finally:
        return 2  # noqa: B012


# ## Context managers
class Recorder:
    def __init__(self, suppress=False):
        self.log, self.suppress = [], suppress

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, kind, value, tb):
        self.log.append(("exit", kind.__name__ if kind else None))
        return self.suppress


@case()
def with_block():
    r = Recorder()
    with r as inner:
        inner.log.append("body")
    return r.log


@case()
def with_suppress():
    r = Recorder(suppress=True)
    with r:
        1 / 0
    return r.log


@case()
def with_propagates():
    r = Recorder()
    try:
        with r:
            raise ValueError("out")
    except ValueError:
        pass
    return r.log


@case()
def with_not_a_manager():
    with 3:
        pass


# ## Mutation of arguments and globals
@case([1, 2], {"k": 0})
def mutates_args(xs, d):
    xs.append(len(xs))
    d["k"] += 1
    return None


@case()
def global_counter():
    COUNTER[0] += 1
    return COUNTER[0] > 0


# ## What 3.12 and 3.13 compile differently (Note [What changes between 3.11, 3.12 and 3.13])
# Every version runs these; on 3.11 they exercise the old opcodes, on 3.12/3.13 the new ones.
@case([1, 2, 3])
def comprehension_restores_outer_variable(xs):
    x = "outer"
    ys = [x * 2 for x in xs]  # 3.12 inlines it: LOAD_FAST_AND_CLEAR x ... STORE_FAST x
    zs = {x: x for x in xs}
    return x, ys, zs, {x % 2 for x in xs}


@case([1, 2])
def comprehension_variable_unbound_after(xs):
    ys = [y + 1 for y in xs]
    try:
        return ys, y  # noqa: F821 - NameError in CPython, before and after 3.12
    except NameError as e:
        return ys, str(e)


@case([3, 1, 2])
def comprehension_raises_inside(xs):
    x = "kept"
    try:
        return [1 // (v - 1) for v in xs]  # the inlined comprehension's cleanup handler restores x
    except ZeroDivisionError:
        return x


@case(list(range(10)))
def slice_forms(xs):
    a, b = xs[2:5], xs[::2]
    xs[1:3] = ["x", "y", "z"]  # 3.12: STORE_SLICE
    del xs[-2:]
    return a, b, xs, xs[:-1], (*a, *b)  # (*a, *b): CALL_INTRINSIC_1 INTRINSIC_LIST_TO_TUPLE


@case(3.14159, "ab")
def fstring_forms(x, s):
    return f"{x}", f"{x:.2f}", f"{s!r}", f"{s!a:>6}", f"{x!s:^10}", f"{s}{x:{'>'}{8}}"  # 3.13: FORMAT_*/CONVERT_VALUE


@case(2, 5)
def keyword_and_star_calls(a, b):
    def f(p, q=0, *rest, r=1, **kw):
        return p, q, rest, r, sorted(kw.items())

    t, d = (a, b), {"z": 9}
    return f(a, q=b), f(*t, r=3), f(*t, **d), f(a, b, 7, r=b, w=1), dict(x=a, **d)  # 3.13: CALL_KW


@case(4)
def closures_with_defaults_and_annotations(n):
    def outer(k: int = 2) -> int:
        def inner(m, *, j=k) -> int:  # 3.13: MAKE_FUNCTION + SET_FUNCTION_ATTRIBUTE (closure, kwdefaults, ...)
            return m * j + n

        return inner(3), inner.__kwdefaults__, sorted(inner.__annotations__)

    return outer(), outer(5), outer.__defaults__


@case(7)
def conditions_on_values(n):
    out = []
    for v in [0, 1, "", "a", None, [], [0], n]:
        out.append((bool(v), not v, v or "x", v and "y", 1 if v else 2))  # 3.13: TO_BOOL
    return out, n > 3 and n < 10, (n == 7) is True


class _SuperA:
    def f(self):
        return "A.f"

    @property
    def p(self):
        return "A.p"


class _SuperB(_SuperA):
    def f(self):
        return "B+" + super().f() + super(_SuperB, self).f()  # 3.12: LOAD_SUPER_ATTR, zero- and two-arg

    @property
    def p(self):
        return super().p + "!"


@case()
def super_forms():
    b = _SuperB()
    return b.f(), b.p, _SuperB.f(b)


@case()
def yield_from_return_and_throw():
    def sub():
        try:
            yield 1
        except KeyError:
            return "sub caught"  # gen.throw through `yield from`: 3.12's CLEANUP_THROW
        yield 2

    def outer():
        r = yield from sub()
        yield r

    g = outer()
    first = next(g)
    return first, g.throw(KeyError("k")), list(g)


CASE_IDS = len(CASES)


@pytest.mark.parametrize("fn,args,kwargs", CASES)
def test_same_as_eager(fn, args, kwargs):
    assert_same_as_eager(fn, *args, **kwargs)


def test_corpus_size():
    assert CASE_IDS >= 80


def test_nested_user_functions_run_in_new_frames():
    """Calls into user Python functions are interpreted (Note [Calls into user code stay in the VM])."""
    seen = []
    vm = VirtualMachine(trace=lambda frame, inst: seen.append(frame.code.co_name))
    assert vm.run(recursion, 5) == 120
    assert seen.count("fact") > 5 and "recursion" in seen
    depths = {f.code.co_name for f in [vm.frame] if f}  # the VM leaves no frame behind
    assert depths == set()


def test_generator_bodies_are_interpreted():
    """Note [Generators suspend the frame loop]: a genexpr's frame runs in our loop too."""
    frames = set()
    vm = VirtualMachine(trace=lambda frame, inst: frames.add(frame.code.co_name))
    assert vm.run(generator_pipeline, 4) == generator_pipeline(4)
    assert "<genexpr>" in frames


def test_user_class_init_is_interpreted():
    frames = []
    vm = VirtualMachine(trace=lambda frame, inst: frames.append(frame.code.co_qualname))
    assert vm.run(super_call) == super_call()
    assert "Point3.__init__" in frames and "Point.__init__" in frames


class _NewStyle:
    def __new__(cls, v):
        obj = super().__new__(cls)
        obj.v = v * 2
        return obj

    def __eq__(self, other):
        return type(other) is type(self) and self.v == other.v


class _BadInit:
    def __init__(self):
        return 3


@pytest.mark.parametrize("cls,args", [(_NewStyle, (2,)), (_BadInit, ()), (Point, (1,)), (dict, ((("a", 1),),))])
def test_class_calls_same_as_eager(cls, args):
    def make(*a):
        return cls(*a)

    assert_same_as_eager(make, *args)


def test_library_code_runs_natively_unless_asked():
    """Note [Which calls run in the VM]: stdlib/site-packages functions are called, not interpreted."""
    text = "    a\n    b\n"
    for interpret_all, expect in [(False, False), (True, True)]:
        names = set()
        vm = VirtualMachine(trace=lambda frame, inst: names.add(frame.code.co_name), interpret_all=interpret_all)
        assert vm.run(lambda t: textwrap.dedent(t), text) == textwrap.dedent(text)
        assert ("dedent" in names) is expect


def test_entry_function_is_interpreted_even_from_the_library():
    vm = VirtualMachine()
    assert vm.run(textwrap.dedent, "  x\n") == "x\n"
    assert vm.instructions_executed > 0


def test_subclass_can_intercept_calls():
    """The symbolic side subclasses the VM and overrides call_function(fn, args, kwargs)."""

    class Intercepting(VirtualMachine):
        def __init__(self):
            super().__init__()
            self.calls = []

        def call_function(self, fn, args, kwargs):
            self.calls.append(getattr(fn, "__name__", type(fn).__name__))
            return super().call_function(fn, args, kwargs)

    vm = Intercepting()
    assert vm.run(recursion, 3) == 6
    assert vm.calls.count("fact") == 3 and vm.calls[0] == "recursion"


def test_coroutines_run_natively():
    async def coro(x):
        return x + 1

    c = VirtualMachine().run(coro, 1)
    with pytest.raises(StopIteration) as stop:
        c.send(None)
    assert stop.value.value == 2


def test_trace_run_records_nested_frames_without_addresses():
    from minidynamo.interpreter import trace_run

    result, steps = trace_run(recursion, 3)
    assert result == recursion(3)
    assert steps[0].depth == 0 and steps[0].opname == "MAKE_CELL"  # fact is a closure over itself
    assert max(s.depth for s in steps) == 3  # recursion -> fact -> fact -> fact
    assert "recursion.<locals>.fact" in {s.function for s in steps}
    assert not any("0x" in str(s) for s in steps)
    assert steps[-1].opname == "RETURN_VALUE" and steps[-1].stack == (repr(result),)


def test_instruction_count_matches_trace():
    events = []
    vm = VirtualMachine(trace=lambda frame, inst: events.append((inst.opname, len(frame.stack))))
    vm.run(while_loop, 10)
    assert vm.instructions_executed == len(events)
    assert events[-1][0] == "RETURN_VALUE" and events[-1][1] == 1


def test_trace_sees_stack_before_each_instruction():
    stacks = []
    vm = VirtualMachine(trace=lambda frame, inst: stacks.append((inst.opname, list(frame.stack))))
    vm.run(lambda a, b: a + b, 2, 3)
    assert ("BINARY_OP", [2, 3]) in stacks
    assert ("RETURN_VALUE", [5]) in stacks


def test_unsupported_opcode_fails_loudly():
    src = "def f(x):\n    match x:\n        case [a]:\n            return a\n    return None\n"
    ns: dict = {}
    exec(src, ns)
    with pytest.raises(UnsupportedInstructionError, match=r"opcode MATCH_SEQUENCE at offset \d+ \(line 3\).*Python 3\.\d+"):
        VirtualMachine().run(ns["f"], [1])


def test_every_opname_of_this_python_has_a_handler_or_a_reason():
    """Complete for the subset: each opname of the running Python's table runs, or is refused with a reason."""
    from minidynamo.bytecode import opcode_table
    from minidynamo.interpreter import UNSUPPORTED

    missing = [op for op in opcode_table() if not hasattr(VirtualMachine, f"byte_{op}") and op not in UNSUPPORTED]
    assert missing == []


def test_unsupported_is_not_caught_by_user_except():
    src = "def f(x):\n    try:\n        match x:\n            case [a]:\n                return a\n    except Exception:\n        return 'hidden'\n"
    ns: dict = {}
    exec(src, ns)
    with pytest.raises(UnsupportedInstructionError):
        VirtualMachine().run(ns["f"], [1])


def test_events_report_frames():
    from minidynamo import events

    with events.record() as log:
        VirtualMachine().run(closure, 1)
    frames = [e.code for e in log if e.kind == "interpret_frame"]
    assert frames == ["closure", "closure.<locals>.inner", "closure.<locals>.inner"]


# ---------------------------------------------------------------------------------------------
# Generated programs (hypothesis): random arithmetic and control flow on ints, compiled from source.
# ---------------------------------------------------------------------------------------------

VARS = ["a", "b", "c"]
_expr = st.deferred(
    lambda: st.one_of(
        st.sampled_from(VARS),
        st.integers(-5, 9).map(str),
        st.tuples(_expr, st.sampled_from(["+", "-", "*", "//", "%", "&", "|", "^"]), _expr).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(_expr, st.sampled_from(["<", "<=", "==", "!=", "and", "or"]), _expr).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(_expr, _expr, _expr).map(lambda t: f"({t[0]} if {t[1]} else {t[2]})"),
        _expr.map(lambda e: f"(not {e})"),
        _expr.map(lambda e: f"(-{e})"),
    )
)
_small_expr = _expr.filter(lambda e: len(e) < 60)


def _stmt(depth):
    assign = st.tuples(st.sampled_from(VARS), st.sampled_from(["=", "+=", "-=", "*="]), _small_expr).map(
        lambda t: [f"{t[0]} {t[1]} {t[2]}", f"{t[0]} = {t[0]} % 1000003"]
    )
    # Lists, calls into a nested closure (it reads the cell `c`), comprehensions, unpacking.
    data = st.one_of(
        _small_expr.map(lambda e: [f"xs.append({e})", "xs = xs[-6:]"]),
        st.tuples(st.sampled_from(VARS), _small_expr).map(lambda t: [f"{t[0]} = h({t[1]})"]),
        st.tuples(st.sampled_from(VARS), _small_expr, _small_expr).map(lambda t: [f"{t[0]} = h({t[1]}, v={t[2]})"]),
        st.just(["xs = [v % 7 for v in xs if v]"]),
        st.just(["c = len(xs) + sum(xs) % 97"]),
        st.just(["a, *rest = xs + [b]", "b = len(rest)"]),
        st.just(["xs = sorted(xs, key=lambda v: (v % 3, v))"]),
    )
    assign = st.one_of(assign, data)
    if depth == 0:
        return assign
    block = st.lists(_stmt(depth - 1), min_size=1, max_size=3).map(lambda ls: [line for s in ls for line in s])
    indent = lambda lines: ["    " + line for line in lines]  # noqa: E731
    return st.one_of(
        assign,
        st.tuples(_small_expr, block, block).map(lambda t: [f"if {t[0]}:", *indent(t[1]), "else:", *indent(t[2])]),
        st.tuples(st.integers(0, 4), block).map(lambda t: [f"for i in range({t[0]}):", *indent(t[1]), "    c += i"]),
        st.tuples(st.integers(1, 4), _small_expr, block).map(
            lambda t: [
                f"n = {t[0]}",
                "while n > 0:",
                "    n -= 1",
                f"    if {t[1]}:",
                "        continue",
                *indent(t[2]),
            ]
        ),
        st.tuples(block).map(lambda t: ["try:", *indent(t[0]), "except ZeroDivisionError:", "    a = -1"]),
    )


_PROLOGUE = "xs = [a, b]\ndef h(u, v=1):\n    return (u * v + c) % 1009\n"
_program = st.lists(_stmt(2), min_size=1, max_size=4).map(
    lambda ls: "def f(a, b, c):\n"
    + textwrap.indent(_PROLOGUE + "\n".join(line for s in ls for line in s), "    ")
    + "\n    return a, b, c, xs\n"
)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(_program, st.integers(-20, 20), st.integers(-20, 20), st.integers(-20, 20))
def test_generated_programs(src, a, b, c):
    ns: dict = {}
    exec(compile(src, "<generated>", "exec"), ns)
    assert_same_as_eager(ns["f"], a, b, c)


def test_generated_corpus_covers_jumps():
    """The generated programs must exercise the jump and exception families, or the test above proves little."""
    src = "def f(a, b, c):\n    for i in range(3):\n        if a or b:\n            c += i\n    return a, b, c\n"
    code = compile(src, "<generated>", "exec").co_consts[0]
    assert isinstance(code, types.CodeType)
    ops = {i.opname for i in dis.get_instructions(code)}
    assert {"FOR_ITER", "JUMP_BACKWARD"} <= ops
