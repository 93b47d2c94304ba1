// shim.h: the few CUDA driver API types Strata needs, declared here so that building
// needs no CUDA toolkit, and a table of function pointers filled at run time.
#ifndef STRATA_CUDA_SHIM_H
#define STRATA_CUDA_SHIM_H

#include <stddef.h>
#include <stdint.h>

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext;
typedef void *CUstream;
typedef void *CUevent;
typedef void *CUmodule;
typedef void *CUfunction;
typedef void *CUgraph;
typedef void *CUgraphExec;

// cuLaunchKernelEx's configuration, with the one attribute Strata sets (programmatic
// stream serialization, id 6); the value is a 64-byte union in the driver's header.
typedef struct {
	int id;
	char pad[4];
	union {
		char pad[64];
		int programmaticStreamSerializationAllowed;
	} value;
} CUlaunchAttribute;

typedef struct {
	unsigned int gridDimX, gridDimY, gridDimZ;
	unsigned int blockDimX, blockDimY, blockDimZ;
	unsigned int sharedMemBytes;
	CUstream hStream;
	CUlaunchAttribute *attrs;
	unsigned int numAttrs;
} CUlaunchConfig;

typedef struct {
	void *lib;
	CUresult (*cuInit)(unsigned int);
	CUresult (*cuDriverGetVersion)(int *);
	CUresult (*cuGetErrorName)(CUresult, const char **);
	CUresult (*cuDeviceGetCount)(int *);
	CUresult (*cuDeviceGet)(CUdevice *, int);
	CUresult (*cuDeviceGetName)(char *, int, CUdevice);
	CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
	CUresult (*cuDeviceTotalMem)(size_t *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
	CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
	CUresult (*cuCtxSetCurrent)(CUcontext);
	// Optional (NULL when the driver lacks them): a context of its own, beside the primary one.
	CUresult (*cuCtxCreate)(CUcontext *, unsigned int, CUdevice);
	CUresult (*cuCtxDestroy)(CUcontext);
	// Optional: a stream that waits for a 32-bit value in memory (cuStreamWaitValue32_v2).
	CUresult (*cuStreamWaitValue32)(CUstream, CUdeviceptr, uint32_t, unsigned int);
	// Optional: launches with attributes (programmatic dependent launch).
	CUresult (*cuLaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
	CUresult (*cuCtxSynchronize)(void);
	CUresult (*cuMemGetInfo)(size_t *, size_t *);
	CUresult (*cuMemAlloc)(CUdeviceptr *, size_t);
	CUresult (*cuMemFree)(CUdeviceptr);
	CUresult (*cuMemHostAlloc)(void **, size_t, unsigned int);
	CUresult (*cuMemFreeHost)(void *);
	CUresult (*cuMemHostRegister)(void *, size_t, unsigned int);
	CUresult (*cuMemHostUnregister)(void *);
	CUresult (*cuMemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned int);
	CUresult (*cuMemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
	CUresult (*cuMemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
	CUresult (*cuMemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
	CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
	CUresult (*cuMemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);
	CUresult (*cuStreamCreate)(CUstream *, unsigned int);
	CUresult (*cuStreamDestroy)(CUstream);
	CUresult (*cuStreamSynchronize)(CUstream);
	CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned int);
	CUresult (*cuEventCreate)(CUevent *, unsigned int);
	CUresult (*cuEventDestroy)(CUevent);
	CUresult (*cuEventRecord)(CUevent, CUstream);
	CUresult (*cuEventSynchronize)(CUevent);
	CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
	CUresult (*cuModuleLoadData)(CUmodule *, const void *);
	CUresult (*cuModuleUnload)(CUmodule);
	CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
	CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
	CUresult (*cuLaunchKernel)(CUfunction, unsigned int, unsigned int, unsigned int,
		unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void **, void **);
	CUresult (*cuStreamBeginCapture)(CUstream, int);
	CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
	CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
	CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
	CUresult (*cuGraphExecDestroy)(CUgraphExec);
	CUresult (*cuGraphDestroy)(CUgraph);
} strata_cu;

// strata_cu_open loads the driver library and every symbol above. It returns 0 on
// success, 1 when the library is missing, 2 when a symbol is missing, with a message in err.
int strata_cu_open(strata_cu *d, char *err, int errlen);
void strata_cu_close(strata_cu *d);

// strata_cu_launch sets ctx current on this OS thread and launches f with nargs
// 8-byte argument slots (each kernel parameter is read from the start of its slot);
// early: with programmatic stream serialization (cuLaunchKernelEx), so that f may start
// before the kernel ahead of it ends (f waits for it itself).
CUresult strata_cu_launch(strata_cu *d, CUcontext ctx, CUfunction f, unsigned gx, unsigned gy,
	unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
	uint64_t *args, int nargs, int early);

#endif
