// shim.c: loads the CUDA driver (nvcuda.dll / libcuda.so.1) at run time.
#include "shim.h"

#include <stdio.h>
#include <string.h>

#ifdef _WIN32
#include <windows.h>
static void *lib_open(char *err, int errlen) {
	HMODULE h = LoadLibraryW(L"nvcuda.dll");
	if (!h) snprintf(err, errlen, "nvcuda.dll not found: Windows error %lu", GetLastError());
	return (void *)h;
}
static void *lib_sym(void *lib, const char *name) { return (void *)GetProcAddress((HMODULE)lib, name); }
static void lib_close(void *lib) { FreeLibrary((HMODULE)lib); }
#else
#include <dlfcn.h>
static void *lib_open(char *err, int errlen) {
	void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(err, errlen, "libcuda.so.1 not found: %s", e ? e : "unknown error");
	}
	return h;
}
static void *lib_sym(void *lib, const char *name) { return dlsym(lib, name); }
static void lib_close(void *lib) { dlclose(lib); }
#endif

int strata_cu_open(strata_cu *d, char *err, int errlen) {
	memset(d, 0, sizeof(*d));
	d->lib = lib_open(err, errlen);
	if (!d->lib) return 1;
#define LOAD(field, sym)                                                          \
	do {                                                                          \
		*(void **)(&d->field) = lib_sym(d->lib, sym);                             \
		if (!d->field) {                                                          \
			snprintf(err, errlen, "driver lacks %s (driver too old?)", sym);     \
			lib_close(d->lib);                                                    \
			d->lib = NULL;                                                        \
			return 2;                                                             \
		}                                                                         \
	} while (0)
	LOAD(cuInit, "cuInit");
	LOAD(cuDriverGetVersion, "cuDriverGetVersion");
	LOAD(cuGetErrorName, "cuGetErrorName");
	LOAD(cuDeviceGetCount, "cuDeviceGetCount");
	LOAD(cuDeviceGet, "cuDeviceGet");
	LOAD(cuDeviceGetName, "cuDeviceGetName");
	LOAD(cuDeviceGetAttribute, "cuDeviceGetAttribute");
	LOAD(cuDeviceTotalMem, "cuDeviceTotalMem_v2");
	LOAD(cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
	LOAD(cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
	LOAD(cuCtxSetCurrent, "cuCtxSetCurrent");
	LOAD(cuCtxSynchronize, "cuCtxSynchronize");
	LOAD(cuMemGetInfo, "cuMemGetInfo_v2");
	LOAD(cuMemAlloc, "cuMemAlloc_v2");
	LOAD(cuMemFree, "cuMemFree_v2");
	LOAD(cuMemHostAlloc, "cuMemHostAlloc");
	LOAD(cuMemFreeHost, "cuMemFreeHost");
	LOAD(cuMemHostRegister, "cuMemHostRegister_v2");
	LOAD(cuMemHostUnregister, "cuMemHostUnregister");
	LOAD(cuMemHostGetDevicePointer, "cuMemHostGetDevicePointer_v2");
	LOAD(cuMemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
	LOAD(cuMemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
	LOAD(cuMemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
	LOAD(cuMemsetD8Async, "cuMemsetD8Async");
	LOAD(cuMemsetD32Async, "cuMemsetD32Async");
	LOAD(cuStreamCreate, "cuStreamCreate");
	LOAD(cuStreamDestroy, "cuStreamDestroy_v2");
	LOAD(cuStreamSynchronize, "cuStreamSynchronize");
	LOAD(cuStreamWaitEvent, "cuStreamWaitEvent");
	LOAD(cuEventCreate, "cuEventCreate");
	LOAD(cuEventDestroy, "cuEventDestroy_v2");
	LOAD(cuEventRecord, "cuEventRecord");
	LOAD(cuEventSynchronize, "cuEventSynchronize");
	LOAD(cuEventElapsedTime, "cuEventElapsedTime");
	LOAD(cuModuleLoadData, "cuModuleLoadData");
	LOAD(cuModuleUnload, "cuModuleUnload");
	LOAD(cuModuleGetFunction, "cuModuleGetFunction");
	LOAD(cuFuncSetAttribute, "cuFuncSetAttribute");
	LOAD(cuLaunchKernel, "cuLaunchKernel");
	LOAD(cuStreamBeginCapture, "cuStreamBeginCapture_v2");
	LOAD(cuStreamEndCapture, "cuStreamEndCapture");
	LOAD(cuGraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
	LOAD(cuGraphLaunch, "cuGraphLaunch");
	LOAD(cuGraphExecDestroy, "cuGraphExecDestroy");
	LOAD(cuGraphDestroy, "cuGraphDestroy");
#undef LOAD
	// Optional symbols: a driver without them still runs everything but NewOwnContext.
	*(void **)(&d->cuCtxCreate) = lib_sym(d->lib, "cuCtxCreate_v2");
	*(void **)(&d->cuCtxDestroy) = lib_sym(d->lib, "cuCtxDestroy_v2");
	// Optional: without it the host finishes work before it queues what depends on it.
	*(void **)(&d->cuStreamWaitValue32) = lib_sym(d->lib, "cuStreamWaitValue32_v2");
	// Optional: without it every launch is an ordinary one.
	*(void **)(&d->cuLaunchKernelEx) = lib_sym(d->lib, "cuLaunchKernelEx");
	return 0;
}

void strata_cu_close(strata_cu *d) {
	if (d->lib) lib_close(d->lib);
	d->lib = NULL;
}

CUresult strata_cu_launch(strata_cu *d, CUcontext ctx, CUfunction f, unsigned gx, unsigned gy,
	unsigned gz, unsigned bx, unsigned by, unsigned bz, unsigned shmem, CUstream s,
	uint64_t *args, int nargs, int early) {
	void *params[32];
	if (nargs > 32) return 1; // CUDA_ERROR_INVALID_VALUE
	for (int i = 0; i < nargs; i++) params[i] = &args[i];
	CUresult r = d->cuCtxSetCurrent(ctx);
	if (r) return r;
	if (early && d->cuLaunchKernelEx) {
		CUlaunchAttribute attr;
		memset(&attr, 0, sizeof attr);
		attr.id = 6; // CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
		attr.value.programmaticStreamSerializationAllowed = 1;
		CUlaunchConfig cfg = {gx, gy, gz, bx, by, bz, shmem, s, &attr, 1};
		return d->cuLaunchKernelEx(&cfg, f, params, NULL);
	}
	return d->cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}
