package httpapi

// SetRoundRobin sets the keyless round-robin counter (tests start it near a wrap).
func (s *Server) SetRoundRobin(v uint32) { s.sticky.Store(v) }

// BodyPoolStats returns the JSON produce body pool's misses (buffers allocated) and idle
// bytes.
func (s *Server) BodyPoolStats() (misses int64, idle int64) {
	s.bodies.mu.Lock()
	defer s.bodies.mu.Unlock()
	return s.bodies.misses, s.bodies.idle
}
