"""Every import of a private PyTorch API lives in this one package.

Place in the pipeline: none; it is the seam between minidynamo and the torch
internals it mirrors or uses as an oracle. Private torch APIs move between
releases, so a torch upgrade should touch this package and no other.

Rule for contributors: a module of minidynamo that needs ``torch._something``
imports it from here (``from minidynamo._torch_private import ...``). Tests that
use the real torch as the oracle import it from here too. Three modules, one concept
each, their sections following the pipeline in chapter order (bytecode, interpreter,
Dynamo, fake tensors, dispatcher, decompositions, functionalization, joint graph and
partitioning, the three passes):

    internals.py   what minidynamo builds on (pytrees, dispatcher switches, op entry points)
    oracles.py     the real torch, run to compare against (its Dynamo, FakeTensor, AOTAutograd)
    inductor.py    torch's Inductor, which the "inductor" backend uses behind our AOTAutograd

Add a name to the section of the stage that needs it, in the module of its use, and
list it below. Each name says what it is in torch. Every name is importable from here;
the submodules import nothing heavy at import time (tests/test_cold_start.py).
"""

from __future__ import annotations

from minidynamo._torch_private.internals import (  # noqa: F401
    SUPPORTED_NODES,
    AutoDispatchBelowAutograd,
    DisableTorchDispatch,
    DispatchKey,
    DispatchKeySet,
    EnablePreDispatch,
    ExcludeDispatchKeyGuard,
    NN_FUNCTIONS,
    OpOverload,
    PreserveDispatchKeyGuard,
    StorageWeakRef,
    TENSOR_BASE,
    TorchDispatchMode,
    VARIABLE_FUNCTIONS,
    _CONTAINERS,
    _DisableWhenDynamoLoaded,
    _lazy_graph_module_class,
    _torch_tree_map,
    after_autograd_keyset,
    autograd_would_have_decomposed,
    autograd_node_created_hook,
    clear_python_dispatch_cache,
    cublas_reduced_precision,
    default_device_constructors,
    default_device_module,
    defer_dynamo_in_meta_kernels,
    disable_functionalization,
    disabled_torch_function_impl,
    dispatch_dump,
    dispatch_dump_table,
    dispatch_get_all_op_names,
    dispatch_has_backend_fallback,
    dispatch_has_computed_kernel_for_dispatch_key,
    dispatch_has_kernel_for_dispatch_key,
    dispatch_keys,
    dispatch_keyset_full_after,
    dispatch_tls_is_dispatch_key_included,
    dispatch_tls_local_exclude_set,
    dispatch_tls_local_include_set,
    dynamo_graph_break_fn,
    enable_functionalization,
    enable_python_dispatcher,
    from_functional_tensor,
    graph_target_to_str,
    is_functional_tensor,
    is_in_torch_dispatch_mode,
    len_torch_function_stack,
    lazy_graph_module,
    load_python_kernels,
    mirror_autograd_meta,
    mirror_conj_neg,
    no_dispatch,
    pop_current_dispatch_mode_if,
    python_dispatcher_kernels,
    set_grad_enabled_c,
    set_meta_in_tls_dispatch_include,
    sym_sqrt,
    to_functional_tensor,
    torch_dispatch_stack_len,
    torch_function_mode_types,
    torch_function_state,
    tree_flatten,
    tree_map,
    tree_unflatten,
    unsafe_set_version_counter,
)
from minidynamo._torch_private.inductor import inductor_compile_fx, inductor_graphs_recorder  # noqa: F401
from minidynamo._torch_private.oracles import (  # noqa: F401
    compiled_autograd_enabled,
    dynamo_cache_entries,
    dynamo_cleaned_instructions,
    dynamo_counters,
    dynamo_explain,
    dynamo_global_state_fields,
    dynamo_instruction_translator_base,
    dynamo_mark_dynamic,
    dynamo_mark_static,
    dynamo_parse_exception_table,
    dynamo_reset,
    dynamo_serving_entry,
    dynamo_cache_order,
    dynamo_guard_failures,
    dynamo_guard_tree,
    dynamo_config_patch,
    dynamo_warnings,
    dynamo_unique_graphs,
    op_db,
    real_fake_errors,
    real_fake_tensor_class,
    real_fake_tensor_mode,
    real_pass_hook_points,
    silence_dynamo_logs,
    torch_aot_function,
    torch_aot_keeping_graphs,
    torch_aot_module_simplified,
    torch_autograd_would_have_decomposed,
    torch_collect_metadata,
    torch_compute_overlapping_tensors,
    torch_core_aten_decompositions,
    torch_decomposition_table,
    torch_gen_alias_from_base,
    torch_get_decompositions,
    torch_inductor_decompositions,
    torch_lookup_backend,
    torch_make_boxed_func,
    torch_make_fx,
    torch_min_cut_partition,
    torch_min_cut_ban_reasons,
    philox_state_tracker,
    torch_symbolic_run,
    tracing_shape_env,
)
