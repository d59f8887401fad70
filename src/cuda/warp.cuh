/* warp.cuh - the warp-level sum the CUDA kernels share (device only). */
#ifndef LM_CUDA_WARP_CUH
#define LM_CUDA_WARP_CUH

/* The sum of v over the lanes of a warp (width 32) or of aligned groups of
 * `width` lanes (a power of two), by xor shuffles in a fixed order (the same
 * bits in every kernel); every lane gets the result. */
template <typename R> static __device__ __forceinline__ R warp_sum(R v, int width = 32)
{
    for (int o = width / 2; o > 0; o /= 2)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif
