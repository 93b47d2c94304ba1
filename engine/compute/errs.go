package compute

import "sync"

// StickyErr keeps the first error that concurrent operations hit, for a backend's Err.
type StickyErr struct {
	mu  sync.Mutex
	err error
}

// Set records err unless an earlier error is already kept; nil is ignored.
func (s *StickyErr) Set(err error) {
	if err == nil {
		return
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
}

// Take returns the kept error and clears it.
func (s *StickyErr) Take() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.err
	s.err = nil
	return err
}
