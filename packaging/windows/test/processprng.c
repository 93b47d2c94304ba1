// processprng.c builds a test-only bcryptprimitives.dll for wine 8, which lacks it: Go 1.26
// executables import ProcessPrng from bcryptprimitives.dll for crypto/rand and the runtime's
// random seed, and refuse to start without it. ProcessPrng fills the buffer from
// RtlGenRandom (advapi32!SystemFunction036), which wine has. smoke.sh copies the DLL into the
// wine prefix's system32; it is never shipped.
#include <windows.h>

BOOLEAN WINAPI SystemFunction036(PVOID buffer, ULONG length);

BOOL WINAPI ProcessPrng(PBYTE data, SIZE_T size) {
	while (size > 0) {
		ULONG n = size > 0x40000000 ? 0x40000000 : (ULONG)size;
		if (!SystemFunction036(data, n))
			return FALSE; // Windows' ProcessPrng never fails; a caller treats FALSE as fatal
		data += n;
		size -= n;
	}
	return TRUE;
}

BOOL WINAPI DllMain(HINSTANCE inst, DWORD reason, LPVOID reserved) {
	(void)inst, (void)reason, (void)reserved;
	return TRUE;
}
