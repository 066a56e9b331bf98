"""The teaching corpora: small programs that the chapters show and the tests check against torch.

Place in the pipeline: none; these are inputs, like ``minidynamo/zoo.py``. They are
user code to minidynamo (the frame hook compiles them, tracebacks keep their frames),
and they hold no test logic: the tests that run them live in ``tests/``.

    dynamo_cases      chapters 03-05   functions for the symbolic interpreter, each run
                                       eagerly, through md.compile and through torch's Dynamo
                                       (tests/test_dynamo_differential.py)
    aot_cases         chapters 09-11   functions full of mutation and aliasing, for every
                                       AOT stage (tests/test_aot_metadata.py, test_aot_runtime.py)
    aot_ported        chapters 09-11   more such functions, ported from PyTorch's
                                       test/test_functionalization.py and
                                       test/dynamo/test_aot_autograd.py (tests/test_aot_ported.py)
    metadata_compare  chapter 09       ours vs torch's ViewAndMutationMeta, field by field
    dynamic_cases     chapter 15       functions called with a sequence of sizes, ported from
                                       PyTorch's test/dynamo (tests/test_dynamic_shapes.py)
    dynamic_compare   chapter 15       ours vs torch.compile on those calls: graphs, entries,
                                       dynamic dims, shape guards (``python -m`` prints the table)
    dynamo_scenarios  chapter 04       call, change the world (a global, a module attribute, a
                                       hook), call again: eager, md.compile and torch.compile, ported
                                       from PyTorch's test/dynamo (tests/test_ported_scenarios.py)

Both corpora are façades over themed modules (a case's module is its theme; the façade
imports them in the corpus's order): dynamo_testing, dynamo_helpers, dynamo_tracing_values,
dynamo_tracing_control, dynamo_tracing_torch, dynamo_tracing_more, dynamo_guards,
dynamo_breaks; aot_testing, aot_mutation, aot_aliasing, aot_inputs;
aot_functionalization, aot_dynamo_tests (aot_ported).

The counterparts in PyTorch's own tree are test/dynamo/test_functions.py,
test/dynamo/test_misc.py, test/dynamo/test_recompiles.py, test/dynamo/test_unspec.py
and test/functorch/test_aotdispatch.py.
"""
