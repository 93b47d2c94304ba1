package compute

// ArgmaxReader is an optional Backend op for greedy decoding: Read of one row of n floats
// reduced to the index of its largest value, the first on ties (sample.Argmax's choice),
// found where the row is. A GPU then downloads one id a token instead of the vocabulary's
// logits, and the host does not scan them. Errors surface at Err, as Read's do.
type ArgmaxReader interface {
	ReadArgmax(src Buf, n int) int
}
