// Prev/Next of a minidynamo Stepper in the static book (no kernel).
// In JupyterLab the buttons' clicks run in Python (minidynamo/widgets/stepper.py); the book
// has no kernel, so here a click moves the stepper's slider one step, as the reader's arrow
// key does: the slider's jslink then turns the page in the browser. The click stops here,
// before the button's own view, which would try to message a kernel.
document.addEventListener(
  "click",
  (event) => {
    const button = event.target.closest(".minidynamo-stepper .minidynamo-kernel-only");
    if (!button) return;
    const handle = button.closest(".minidynamo-stepper").querySelector(".noUi-handle");
    if (!handle) return;
    event.stopPropagation();
    event.preventDefault();
    const key = button.textContent.includes("Prev") ? "ArrowLeft" : "ArrowRight";
    const which = key === "ArrowLeft" ? 37 : 39;
    handle.dispatchEvent(new KeyboardEvent("keydown", { key, keyCode: which, which, bubbles: true }));
  },
  true,
);
