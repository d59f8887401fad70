/* cpuid.c - CPU feature detection for kernel dispatch.
 *
 * On x86 the features come from cpuid leaves 1 and 7 and are only reported
 * when the OS saves the register state they need (xgetbv: XMM+YMM for AVX*,
 * plus opmask/ZMM for AVX-512, plus XTILECFG/XTILEDATA for AMX). Elsewhere
 * every flag is false. Detection runs once (pthread_once); the result is
 * read-only afterwards.
 *
 * AMX on Linux: the tile data state (8 KiB per thread) is off until a process
 * asks for it with arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); a tile
 * instruction without that permission faults (SIGILL). Detection asks once
 * (the permission is process-wide and covers threads created later) and
 * reports AMX only when the request succeeds.
 */
#include <pthread.h>
#include <string.h>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "cpu/cpu.h"

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define LM_X86 1
#endif

static struct lm_cpu_features g_features;
static pthread_once_t g_features_once = PTHREAD_ONCE_INIT;

#ifdef LM_X86
/* XCR0, the register-state mask the OS enabled (valid only with OSXSAVE). */
static uint64_t read_xcr0(void)
{
    uint32_t eax, edx;
    __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
    return ((uint64_t)edx << 32) | eax;
}

/* Ask Linux for the AMX tile data state; true when granted. */
static bool amx_permitted(void)
{
#if defined(__linux__) && defined(SYS_arch_prctl)
    enum { ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18 };
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
    return false;
#endif
}

static void detect_x86(struct lm_cpu_features *f)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    const int base_family = (int)((a >> 8) & 0xF);
    f->family = base_family + (base_family == 0xF ? (int)((a >> 20) & 0xFF) : 0);
    f->sse3 = (c >> 0) & 1;
    f->ssse3 = (c >> 9) & 1;
    bool fma = (c >> 12) & 1;
    bool osxsave = (c >> 27) & 1;
    bool avx = (c >> 28) & 1;
    bool f16c = (c >> 29) & 1;

    uint64_t xcr0 = osxsave ? read_xcr0() : 0;
    bool ymm_ok = (xcr0 & 0x6) == 0x6;             /* XMM and YMM state */
    bool zmm_ok = ymm_ok && (xcr0 & 0xe0) == 0xe0; /* opmask, ZMM_Hi256, Hi16_ZMM */

    f->avx = avx && ymm_ok;
    f->fma = fma && ymm_ok;
    f->f16c = f16c && ymm_ok;

    unsigned max_leaf = __get_cpuid_max(0, NULL);
    __cpuid(0, a, b, c, d); /* vendor string: ebx, edx, ecx */
    f->amd = b == 0x68747541u && d == 0x69746e65u && c == 0x444d4163u; /* "Auth" "enti" "cAMD" */
    if (max_leaf < 7)
        return;
    __cpuid_count(7, 0, a, b, c, d);
    f->avx2 = ((b >> 5) & 1) && ymm_ok;
    f->avx512f = ((b >> 16) & 1) && zmm_ok;
    f->avx512dq = ((b >> 17) & 1) && zmm_ok;
    f->avx512bw = ((b >> 30) & 1) && zmm_ok;
    f->avx512vl = ((b >> 31) & 1) && zmm_ok;
    f->avx512vbmi = ((c >> 1) & 1) && zmm_ok;
    f->avx512vnni = ((c >> 11) & 1) && zmm_ok;
    unsigned sub_max = a; /* leaf 7 subleaf 0 eax: highest subleaf */
    if (((d >> 24) & 1) && (xcr0 & 0x60000) == 0x60000 && amx_permitted()) {
        f->amx_tile = true;
        f->amx_bf16 = (d >> 22) & 1;
        f->amx_int8 = (d >> 25) & 1;
    }
    if (sub_max >= 1) {
        __cpuid_count(7, 1, a, b, c, d);
        f->avx_vnni = ((a >> 4) & 1) && ymm_ok;
        f->avx512bf16 = ((a >> 5) & 1) && zmm_ok;
    }
}
#endif

static void detect(void)
{
    memset(&g_features, 0, sizeof g_features);
#ifdef LM_X86
    detect_x86(&g_features);
#endif
}

/* The features of this CPU (and OS). Never NULL; thread-safe. */
const struct lm_cpu_features *lm_cpu_features(void)
{
    pthread_once(&g_features_once, detect);
    return &g_features;
}
