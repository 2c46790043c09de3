// libgpuscan_soak_heap_probe.so: preloaded (LD_PRELOAD) into the soak's child server. On SIGUSR2
// it returns the heap's free memory to the system (malloc_trim) and writes the heap's live bytes
// (mallinfo2: arenas in use plus mmapped chunks) to $GPUSCAN_SOAK_HEAP_FILE. The server's own
// code is untouched.
//
// Why (measured, docs/RELIABILITY.md): glibc keeps freed memory in its arenas, and the server
// raises the mmap threshold to 16 MiB (server/main.cc) so its 1-4 MiB message buffers are reused
// from the heap. Its RSS with no client connected therefore reflects the allocator's high-water
// mark and how the last load happened to fragment the heap: between two quiet moments of one run
// it moved by -80% to +55% raw and by -40% to +20% after malloc_trim, while the live heap stayed
// under 1 MiB. A leak grows the live heap; the allocator's retention does not. (The soak turns
// glibc's per-thread cache off in the server it starts: mallinfo2 counts the chunks that cache
// holds as live, and its slow filling looked like a leak.)
//
// The constructor runs in the main thread before main(): it blocks SIGUSR2 there (every later
// thread inherits the mask) and starts the one thread that sigwaits for it, so the signal never
// interrupts the server and the work runs in a normal thread, not in a signal handler.
#include <malloc.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>

namespace {

void* ProbeOnSignal(void*) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  unsigned long probes = 0;
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    malloc_trim(0);
    const struct mallinfo2 mi = mallinfo2();
    if (const char* path = std::getenv("GPUSCAN_SOAK_HEAP_FILE")) {
      if (FILE* f = std::fopen(path, "w")) {
        // live bytes, heap bytes (arenas + mmapped), probe number (the soak waits for it to change)
        std::fprintf(f, "%zu %zu %lu\n", mi.uordblks + mi.hblkhd, mi.arena + mi.hblkhd, ++probes);
        std::fclose(f);
      }
    }
  }
  return nullptr;
}

__attribute__((constructor)) void StartProbeThread() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  pthread_t thread;
  if (pthread_create(&thread, nullptr, ProbeOnSignal, nullptr) == 0) pthread_detach(thread);
}

}  // namespace
