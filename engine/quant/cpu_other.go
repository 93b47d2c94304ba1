//go:build !amd64 || !cgo

package quant

// Without amd64 and cgo only the plain Go kernels exist.

func vdBestLevel() vdLevel { return levelGeneric }

func vdLevels() []vdLevel { return []vdLevel{levelGeneric} }

func vdNative(vdLevel, Type, []byte, int, *Activations, []float32, int, int, int) bool { return false }

func vdNativeFloatRow(vdLevel, []float32, *Activations, []float32, int) bool { return false }

func readSumNative([]byte) (uint64, int) { return 0, 0 }

func vdQuantizeNative(vdLevel, []float32, int, []int8, []float32, []int16) bool { return false }
