package httpapi

// SetRoundRobin sets the keyless round-robin counter (tests start it near a wrap).
func (s *Server) SetRoundRobin(v uint32) { s.sticky.Store(v) }
