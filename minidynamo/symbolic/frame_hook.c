/* minidynamo's PEP 523 frame hook: every fresh Python frame passes the cache.

   Mirrors the core of torch/csrc/dynamo/eval_frame.c (and the 127-line eval_frame.c of
   early torchdynamo). Built on first use by frame_hook.py; read that module's docstring
   and Note [The frame hook] in eval_frame.py for how Python uses it.

   PEP 523 lets an extension replace the function CPython calls to evaluate a frame
   (`_PyInterpreterState_SetEvalFrameFunc`). Ours, `hook`, is installed only while some
   thread runs a compiled function, and does, for every frame CPython is about to run:

     1. No callback on this thread, a generator / coroutine frame, a frame being resumed
        or thrown into, a frame with its own locals dict (module, class body, exec):
        run it in CPython untouched (`_PyEval_EvalFrameDefault`).
     2. A code object marked SKIP (not user code): the same, without asking Python.
     3. Otherwise call the thread's callback, `callback(function, L)` (L: the arguments
        and free variables by name, as the cache's guards read them), with the hook
        off for this thread (so our own Python is never hooked). It answers
          SKIP      mark the code object, run the frame in CPython;
          DEFAULT   run the frame in CPython (its callees still pass the hook);
          (DEFAULT, cb)  the same, its callees asking cb instead (run-only mode);
          a value   the compiled code ran (guards held): that is the frame's result,
                    and the frame itself never runs.

   What it relies on, per version (CPython's Include/internal/pycore_frame.h, ceval.c):
     3.11  _PyInterpreterFrame: f_func, f_code, f_locals, prev_instr (== code start - 1
           for a fresh frame), owner, localsplus[] (the arguments first). The *caller*
           (_PyEval_Vector) clears and pops the frame after the eval function returns,
           so a frame we answer for is left as it is.
     3.12  f_func -> f_funcobj. The eval function itself clears and pops its frame
           (ceval.c clear_thread_frame): when we answer for a frame we must do the same,
           `clear_fresh_frame` below (the frame was never linked into the thread's frame
           chain, so it has no frame object). _PyThreadState_PopFrame is not exported:
           `pop_frame` redoes pystate.c's (give back a data-stack chunk the frame opened).
     3.13  f_code -> f_executable, prev_instr -> instr_ptr (== code start when fresh);
           _PyThreadState_PopFrame is exported and used.
   When a compiled function is running, CPython (3.11-3.13) does not inline Python-to-
   Python calls (CALL checks `interp->eval_frame == NULL`), so every call reaches us.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "minidynamo's frame hook supports CPython 3.11-3.13"
#endif

#define Py_BUILD_CORE
#include <internal/pycore_frame.h>
#undef Py_BUILD_CORE

#if PY_VERSION_HEX >= 0x030D0000
#define FRAME_CODE(f) ((PyCodeObject *)(f)->f_executable)
#define FRAME_FUNC(f) ((f)->f_funcobj)
#define FRAME_IS_FRESH(f) ((f)->instr_ptr == _PyCode_CODE(FRAME_CODE(f)))
#elif PY_VERSION_HEX >= 0x030C0000
#define FRAME_CODE(f) ((f)->f_code)
#define FRAME_FUNC(f) ((f)->f_funcobj)
#define FRAME_IS_FRESH(f) ((f)->prev_instr == _PyCode_CODE(FRAME_CODE(f)) - 1)
#else
#define FRAME_CODE(f) ((f)->f_code)
#define FRAME_FUNC(f) ((PyObject *)(f)->f_func)
#define FRAME_IS_FRESH(f) ((f)->prev_instr == _PyCode_CODE(FRAME_CODE(f)) - 1)
#endif

#if PY_VERSION_HEX < 0x030C0000 /* 3.12 renamed these (the old names stay as aliases) */
#define PyUnstable_Code_GetExtra _PyCode_GetExtra
#define PyUnstable_Code_SetExtra _PyCode_SetExtra
#define PyUnstable_Eval_RequestCodeExtraIndex _PyEval_RequestCodeExtraIndex
#endif

#define NOT_A_PLAIN_CALL (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_ITERABLE_COROUTINE)

static Py_tss_t callback_key = Py_tss_NEEDS_INIT; /* this thread's callback (a strong ref) or NULL */
static Py_ssize_t extra_index = -1;               /* our slot in each code object's co_extra */
static char skip_mark;                            /* stored in that slot: not user code */
static int active_threads = 0;                    /* threads with a callback: hook installed while > 0 */
static PyObject *SKIP, *DEFAULT;                  /* the callback's two non-value answers */
static long frames_seen = 0, callbacks_made = 0;

static PyObject *eval_default(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag) {
    return _PyEval_EvalFrameDefault(ts, frame, throwflag);
}

#if PY_VERSION_HEX >= 0x030C0000
#if PY_VERSION_HEX < 0x030D0000
static void pop_frame(PyThreadState *ts, _PyInterpreterFrame *frame) {
    /* pystate.c _PyThreadState_PopFrame (3.12): the frame is the top of the data stack;
       if it is the first thing in its chunk, that chunk goes back and the previous one
       becomes current. */
    PyObject **base = (PyObject **)frame;
    _PyStackChunk *chunk = ts->datastack_chunk;
    if (base == &chunk->data[0]) {
        _PyStackChunk *previous = chunk->previous;
        PyObjectArenaAllocator arena;
        ts->datastack_top = &previous->data[previous->top];
        ts->datastack_chunk = previous;
        ts->datastack_limit = (PyObject **)(((char *)previous) + previous->size);
        PyObject_GetArenaAllocator(&arena);
        arena.free(arena.ctx, chunk, chunk->size);
    } else {
        ts->datastack_top = base;
    }
}
#else
#define pop_frame _PyThreadState_PopFrame
#endif

static void clear_fresh_frame(PyThreadState *ts, _PyInterpreterFrame *frame) {
    /* ceval.c clear_thread_frame + frame.c _PyFrame_ClearExceptCode, for a frame that
       never ran: it was never linked (frame->previous is set by the eval loop), so no
       frame object exists; only its locals, function and code hold references. */
    ts->c_recursion_remaining--;
    for (int i = 0; i < frame->stacktop; i++) {
        Py_XDECREF(frame->localsplus[i]);
    }
    Py_XDECREF(frame->f_locals);
    Py_DECREF(frame->f_funcobj);
    ts->c_recursion_remaining++;
    Py_DECREF(FRAME_CODE(frame));
    pop_frame(ts, frame);
}
#define ANSWERED(ts, frame) clear_fresh_frame(ts, frame)
#else
#define ANSWERED(ts, frame) ((void)0) /* 3.11: _PyEval_Vector clears and pops it */
#endif

static PyObject *set_callback(PyObject *self, PyObject *cb);

static PyObject *hook(PyThreadState *ts, _PyInterpreterFrame *frame, int throwflag) {
    PyObject *callback = PyThread_tss_get(&callback_key);
    if (callback == NULL || throwflag || frame->owner != FRAME_OWNED_BY_THREAD || frame->f_locals != NULL) {
        return eval_default(ts, frame, throwflag);
    }
    PyCodeObject *code = FRAME_CODE(frame);
    if ((code->co_flags & NOT_A_PLAIN_CALL) || !FRAME_IS_FRESH(frame) || !PyFunction_Check(FRAME_FUNC(frame))) {
        return eval_default(ts, frame, throwflag);
    }
    void *extra = NULL;
    if (PyUnstable_Code_GetExtra((PyObject *)code, extra_index, &extra) < 0) {
        PyErr_Clear();
        return eval_default(ts, frame, throwflag);
    }
    frames_seen++;
    if (extra == &skip_mark) {
        return eval_default(ts, frame, throwflag);
    }
    /* L: a fresh frame holds its arguments, in order, at the front of localsplus (their
       names at the front of co_localsplusnames); the closure's cells hold the free
       variables, whose names end co_localsplusnames (COPY_FREE_VARS has not run yet) */
    int nargs = code->co_argcount + code->co_kwonlyargcount + ((code->co_flags & CO_VARARGS) != 0) +
                ((code->co_flags & CO_VARKEYWORDS) != 0);
    PyObject *names = code->co_localsplusnames;
    for (int i = 0; i < nargs; i++) {
        if (frame->localsplus[i] == NULL) { /* not a call CPython bound: leave it alone */
            return eval_default(ts, frame, throwflag);
        }
    }
    PyObject *L = PyDict_New();
    int failed = L == NULL;
    for (int i = 0; !failed && i < nargs; i++) {
        failed = PyDict_SetItem(L, PyTuple_GET_ITEM(names, i), frame->localsplus[i]) < 0;
    }
    PyObject *closure = ((PyFunctionObject *)FRAME_FUNC(frame))->func_closure;
    Py_ssize_t nfree = closure == NULL ? 0 : PyTuple_GET_SIZE(closure);
    for (Py_ssize_t k = 0; !failed && k < nfree && nfree == code->co_nfreevars; k++) {
        PyObject *contents = PyCell_GET(PyTuple_GET_ITEM(closure, k));
        if (contents != NULL) { /* an empty cell (a name not yet bound) is not in L */
            failed = PyDict_SetItem(L, PyTuple_GET_ITEM(names, code->co_nlocalsplus - nfree + k), contents) < 0;
        }
    }
    if (failed) {
        Py_XDECREF(L);
        ANSWERED(ts, frame);
        return NULL;
    }
    callbacks_made++;
    PyThread_tss_set(&callback_key, NULL); /* our own Python runs unhooked */
    PyObject *answer = PyObject_CallFunctionObjArgs(callback, FRAME_FUNC(frame), L, NULL);
    PyThread_tss_set(&callback_key, callback);
    Py_DECREF(L);
    if (answer != NULL && PyTuple_CheckExact(answer) && PyTuple_GET_SIZE(answer) == 2 &&
        PyTuple_GET_ITEM(answer, 0) == DEFAULT) {
        /* (DEFAULT, cb): run the frame in CPython, its callees asking cb instead (torch's
           recursive action: RUN_ONLY after the recompile limit, eval_frame_cpp.cpp) */
        PyObject *previous = set_callback(NULL, PyTuple_GET_ITEM(answer, 1));
        Py_DECREF(answer);
        if (previous == NULL) {
            ANSWERED(ts, frame);
            return NULL;
        }
        PyObject *out = eval_default(ts, frame, 0);
        PyObject *back = set_callback(NULL, previous);
        Py_DECREF(previous);
        Py_XDECREF(back);
        return out;
    }
    if (answer == SKIP || answer == DEFAULT) {
        if (answer == SKIP && PyUnstable_Code_SetExtra((PyObject *)code, extra_index, &skip_mark) < 0) {
            PyErr_Clear();
        }
        Py_DECREF(answer);
        return eval_default(ts, frame, 0);
    }
    ANSWERED(ts, frame); /* a value, or NULL with the user's (or our) exception set */
    return answer;
}

static void sync_installed(void) {
    PyInterpreterState *interp = PyInterpreterState_Get();
    _PyFrameEvalFunction want = active_threads > 0 ? hook : _PyEval_EvalFrameDefault;
    if (_PyInterpreterState_GetEvalFrameFunc(interp) != want) {
        _PyInterpreterState_SetEvalFrameFunc(interp, want);
    }
}

/* set_callback(cb or None) -> the previous one (or None): this thread's callback. */
static PyObject *set_callback(PyObject *self, PyObject *cb) {
    PyObject *previous = PyThread_tss_get(&callback_key);
    PyObject *next = cb == Py_None ? NULL : cb;
    Py_XINCREF(next);
    if (PyThread_tss_set(&callback_key, next) != 0) {
        Py_XDECREF(next);
        PyErr_SetString(PyExc_RuntimeError, "frame_hook: cannot set the thread's callback");
        return NULL;
    }
    active_threads += (next != NULL) - (previous != NULL);
    sync_installed();
    return previous ? previous : Py_NewRef(Py_None); /* the reference the slot held */
}

/* call_with(cb or None, fn, *args, **kwargs): fn(*args, **kwargs) with this thread's callback set to cb. */
static PyObject *call_with(PyObject *self, PyObject *const *argv, Py_ssize_t nargsf, PyObject *kwnames) {
    Py_ssize_t argc = PyVectorcall_NARGS(nargsf);
    if (argc < 2) {
        PyErr_SetString(PyExc_TypeError, "call_with(callback, fn, *args, **kwargs)");
        return NULL;
    }
    PyObject *previous = set_callback(self, argv[0]);
    if (previous == NULL) {
        return NULL;
    }
    PyObject *out = PyObject_Vectorcall(argv[1], argv + 2, (size_t)(argc - 2), kwnames);
    PyObject *back = set_callback(self, previous);
    Py_DECREF(previous);
    Py_XDECREF(back);
    return out;
}

static PyObject *unskip(PyObject *self, PyObject *code) {
    if (!PyCode_Check(code)) {
        PyErr_SetString(PyExc_TypeError, "unskip expects a code object");
        return NULL;
    }
    if (PyUnstable_Code_SetExtra(code, extra_index, NULL) < 0) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *is_skipped(PyObject *self, PyObject *code) {
    void *extra = NULL;
    if (!PyCode_Check(code) || PyUnstable_Code_GetExtra(code, extra_index, &extra) < 0) {
        PyErr_SetString(PyExc_TypeError, "is_skipped expects a code object");
        return NULL;
    }
    return PyBool_FromLong(extra == &skip_mark);
}

static PyObject *stats(PyObject *self, PyObject *unused) {
    return Py_BuildValue("{s:l,s:l,s:i,s:O}", "frames_seen", frames_seen, "callbacks", callbacks_made,
                         "active_threads", active_threads, "installed",
                         _PyInterpreterState_GetEvalFrameFunc(PyInterpreterState_Get()) == hook ? Py_True : Py_False);
}

static PyMethodDef methods[] = {
    {"set_callback", set_callback, METH_O, "Set this thread's callback (None: off); returns the previous one."},
    {"call_with", (PyCFunction)(void (*)(void))call_with, METH_FASTCALL | METH_KEYWORDS, "call_with(cb, fn, *args, **kwargs)"},
    {"unskip", unskip, METH_O, "Forget that a code object was marked SKIP."},
    {"is_skipped", is_skipped, METH_O, "Was this code object marked SKIP?"},
    {"stats", stats, METH_NOARGS, "Frames the hook looked at, callbacks made, whether it is installed."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "minidynamo_frame_hook", NULL, -1, methods};

PyMODINIT_FUNC PyInit_minidynamo_frame_hook(void) {
    if (PyThread_tss_create(&callback_key) != 0) {
        PyErr_SetString(PyExc_RuntimeError, "frame_hook: no thread-local slot");
        return NULL;
    }
    extra_index = PyUnstable_Eval_RequestCodeExtraIndex(NULL);
    if (extra_index < 0) {
        PyErr_SetString(PyExc_RuntimeError, "frame_hook: no code-extra slot");
        return NULL;
    }
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) {
        return NULL;
    }
    SKIP = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type); /* two unique object()s */
    DEFAULT = PyObject_CallNoArgs((PyObject *)&PyBaseObject_Type);
    if (SKIP == NULL || DEFAULT == NULL || PyModule_AddObjectRef(m, "SKIP", SKIP) < 0 ||
        PyModule_AddObjectRef(m, "DEFAULT", DEFAULT) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
