package cuda

import "fmt"

// sampleKernelNames lists sample.cu's kernels for kernelNames.
func sampleKernelNames() []string { return []string{"argmax_f32"} }

// Argmax writes to out (one int32) the index of the largest of the n floats at x, as
// engine/sample.Argmax picks it: the first on ties, 0 when x[0] is NaN.
func (k *Kernels) Argmax(s *Stream, x DevicePtr, n int, out DevicePtr) error {
	if n <= 0 {
		return fmt.Errorf("cuda: argmax of %d values", n)
	}
	return k.launch("argmax_f32", s, Dim3{X: 1}, Dim3{X: 1024}, 0, new(Args).Ptr(x).Int(n).Ptr(out))
}
