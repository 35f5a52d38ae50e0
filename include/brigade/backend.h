/* Device backends: what a device computes with. A backend owns the memory of its devices' arenas
 * (an allocator), the copies that move bytes to, from and between them, and a table of kernels
 * (every kernel the autograd ops, the executor, gradient clipping and the optimizer call). The
 * CPU backend is the one brigade has; another device kind (a GPU) is another backend, with no
 * change to autograd or the models. The table itself is internal (src/kernels/backend.h). */
#ifndef BRIGADE_BACKEND_H
#define BRIGADE_BACKEND_H

#ifdef __cplusplus
extern "C" {
#endif

typedef struct brg_backend brg_backend;

/* The host CPU: arenas in host memory, the SIMD kernels brg_simd_isa() picked. */
const brg_backend *brg_backend_cpu(void);
/* "cpu", ... */
const char *brg_backend_name(const brg_backend *backend);

#ifdef __cplusplus
}
#endif
#endif
