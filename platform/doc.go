// Package platform answers questions about the machine Strata runs on (RAM, CPU, NVIDIA GPUs,
// WSL2, the drive that holds a model) and wraps the few OS calls the engine needs (page
// locking, paging advice, unbuffered reads, aligned allocations), each with a Linux and a
// Windows implementation. It is a leaf: it imports nothing of Strata's.
//
// Probes never fail the caller: a fact that cannot be found is left at its zero value and a
// Reason field says why, and every probe runs under a timeout so a stuck driver or a dead
// network drive cannot hang the app.
package platform
