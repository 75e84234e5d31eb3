//! Give freed heap memory back to the system.
//!
//! Loading the models allocates far more than it keeps: ONNX Runtime
//! parses each model and builds its optimised graph, the embedder
//! classifies the intent tree's examples, whisper.cpp sizes its buffers.
//! glibc keeps what was freed inside its heaps for reuse, so without a
//! trim `earshot run` carried that peak as resident memory for its whole
//! life (issue 21, point 4: ≤ 300 MB on a 2 GB Pi). `malloc_trim(0)` hands
//! whole free pages back (`madvise(MADV_DONTNEED)` inside the heap); it
//! takes a few milliseconds, so it runs where nobody waits: once the loop
//! is listening and after each turn has finished speaking.

/// Blocks from this size on are mmapped and unmapped when freed (set once
/// in `main` with `mallopt(M_MMAP_THRESHOLD)`, which also stops glibc's
/// threshold from sliding up to the largest block ever freed). 128 KiB is
/// glibc's own starting value; measured in notes/latency.md.
pub const MMAP_THRESHOLD: i32 = 128 * 1024;

/// Return free heap pages to the system; how many bytes of resident
/// memory that released is not known here (see `/proc/self/status`).
pub fn give_back() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks glibc's own heap structures under
    // their locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
