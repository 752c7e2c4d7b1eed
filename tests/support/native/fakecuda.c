/* Stand-ins for the CUDA user-space libraries, for envlock's library probe tests.
 *
 * Each -D switch adds one real entry point with the real signature, returning a known
 * value, so the probe's ctypes calls and version decoding run against a real shared
 * object without a GPU or a multi-gigabyte download:
 *
 *   -DCUDART_CODE=12010        int cudaRuntimeGetVersion(int *)
 *   -DCUBLAS_VER=12,4,5        cublasStatus_t cublasGetProperty(libraryPropertyType, int *)
 *   -DCUBLASLT_VER=12,4,5      cublasStatus_t cublasLtGetProperty(libraryPropertyType, int *)
 *   -DCUBLASLT_CODE=111103     size_t cublasLtGetVersion(void)
 *   -DCUDNN_CODE=90100         size_t cudnnGetVersion(void)
 *   -DNCCL_CODE=22105          ncclResult_t ncclGetVersion(int *)
 *   -DNVJITLINK_VER=12,4       nvJitLinkResult nvJitLinkVersion(unsigned *, unsigned *)
 */
#include <stddef.h>

int envlock_fake_marker(void) { return 42; }

#ifdef CUDART_CODE
int cudaRuntimeGetVersion(int *version) {
    if (!version) return 1; /* cudaErrorInvalidValue */
    *version = CUDART_CODE;
    return 0;
}
#endif

#ifdef CUBLAS_VER
int cublasGetProperty(int type, int *value) {
    static const int v[3] = {CUBLAS_VER};
    if (!value || type < 0 || type > 2) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    *value = v[type];
    return 0;
}
#endif

#ifdef CUBLASLT_VER
int cublasLtGetProperty(int type, int *value) {
    static const int v[3] = {CUBLASLT_VER};
    if (!value || type < 0 || type > 2) return 7;
    *value = v[type];
    return 0;
}
#endif

#ifdef CUBLASLT_CODE
size_t cublasLtGetVersion(void) { return CUBLASLT_CODE; }
#endif

#ifdef CUDNN_CODE
size_t cudnnGetVersion(void) { return CUDNN_CODE; }
#endif

#ifdef NCCL_CODE
int ncclGetVersion(int *version) {
    if (!version) return 4; /* ncclInvalidArgument */
    *version = NCCL_CODE;
    return 0;
}
#endif

#ifdef NVJITLINK_VER
int nvJitLinkVersion(unsigned int *major, unsigned int *minor) {
    static const unsigned int v[2] = {NVJITLINK_VER};
    if (!major || !minor) return 1;
    *major = v[0];
    *minor = v[1];
    return 0;
}
#endif
