// strata.cu: the one translation unit nvcc compiles into kernels.fatbin; each family
// file is also a standalone translation unit.
#include "mul_mat_vec.cu"
#include "mul_mat_vec_q8.cu"
#include "dequantize.cu"
#include "gemm.cu"
#include "norm.cu"
#include "rope.cu"
#include "attention.cu"
#include "router.cu"
#include "elementwise.cu"
#include "deltanet.cu"
#include "fused.cu"
#include "sample.cu"
