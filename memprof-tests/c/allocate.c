/* A C function that allocates as glibc's and C libraries' code does (opendir's buffer in __alloc_dir, a
 * RocksDB block): compiled without frame pointers, and holding data, not a frame address, in the
 * frame-pointer register while it calls malloc. A frame-pointer walk that reaches it reads that data as
 * the next frame and stops; its unwind tables (.eh_frame) still lead to its caller. */
#include <stdlib.h>
#include <string.h>

void *memprof_test_c_allocate(size_t size) {
#if defined(__x86_64__)
    __asm__ volatile("movq $0x5a5a5a5a, %%rbp" ::: "rbp");
#elif defined(__aarch64__)
    __asm__ volatile("mov x29, #0x5a5a" ::: "x29");
#endif
    void *block = malloc(size);
    if (block != NULL) {
        memset(block, 1, size);
    }
    return block;
}
