/* cpu.h - the CPU backend: a persistent threadpool, a graph executor, one file
 * per op family (cpu/ops/), and kernels chosen at run time by CPU features
 * (cpu/kernels/: generic/ always built; x86-avx2/, x86-avx512/ override it).
 *
 * The backend computes graphs whose tensors live in host buffers. Threads: by
 * default the number of online cores; never more threads than cores.
 */
#ifndef LM_CPU_H
#define LM_CPU_H

#include <stdbool.h>

#include "backend/backend.h"

/* A new CPU backend with n_threads workers (<= 0: one per online core). */
lm_status lm_cpu_backend_new(int n_threads, lm_backend_t *out);
/* Registry entry "cpu" (init = lm_cpu_backend_new with the default threads). */
const struct lm_backend_reg *lm_cpu_backend_reg(void);
bool lm_backend_is_cpu(lm_backend_t be);

/* The CPU's repacking buffer type: host memory where weight matrices are kept
 * in the row-interleaved layouts of the GEMM kernels (cpu/repack.h). Write a
 * tensor whole with lm_tensor_set (it is repacked); lm_tensor_get unpacks.
 * Only MUL_MAT reads such tensors. */
lm_buft lm_cpu_repack_buft(void);
/* True when t's type and shape have a repacked layout (2-D, rows a multiple of 8). */
bool lm_cpu_can_repack(const struct lm_tensor *t);

/* CPU features found by cpuid (and enabled by the OS), for dispatch and for
 * llama_print_system_info. */
struct lm_cpu_features {
    bool sse3, ssse3, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512dq, avx512vnni, avx512bf16, avx512vbmi;
    bool avx_vnni;
    /* AMX: cpuid leaf 7 edx bits 24 (tile), 22 (bf16), 25 (int8), reported only
     * when XCR0 has the tile state (bits 17-18) and Linux granted this process
     * the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, asked once here). */
    bool amx_tile, amx_bf16, amx_int8;
    bool amd; /* vendor "AuthenticAMD" (cpuid leaf 0): kernel tuning, not capability */
    int family; /* cpuid leaf 1 display family (base + extended): AMD 25 = Zen 3/4, 26 = Zen 5 */
};
const struct lm_cpu_features *lm_cpu_features(void);

/* Kernel sets ("generic", "avx2", "avx512", "amx"), most capable last. "amx"
 * is the AVX-512 set plus the AMX-BF16 panel GEMM of F16/BF16 weights. */
enum lm_cpu_isa { LM_ISA_GENERIC = 0, LM_ISA_AVX2 = 1, LM_ISA_AVX512 = 2, LM_ISA_AMX = 3, LM_ISA_COUNT };
const char *lm_cpu_isa_name(enum lm_cpu_isa isa);
/* The best kernel set this machine runs (and this build contains). */
enum lm_cpu_isa lm_cpu_isa_best(void);
/* Use kernel sets up to `isa` (for tests and benches comparing ISAs); returns
 * the level actually in effect (min of isa and best). Process-wide; call
 * between graph computations. The starting level is the best one;
 * llama_backend_init calls this once when the environment variable LAMINA_ISA
 * names a level ("generic", "avx2", "avx512", "amx"). */
enum lm_cpu_isa lm_cpu_isa_limit(enum lm_cpu_isa isa);
/* Software prefetch in the AVX-512 kernels (docs/kernels.md): mode 0 off, 1
 * on, anything else the CPU's choice (the default: on, but off on AMD family
 * 25). No effect without the AVX-512 level. Process-wide; call between graph
 * computations (llama_backend_init calls it once with LAMINA_PREFETCH). */
void lm_cpu_prefetch_set(int mode);

#endif
