package memory

// Serving reports whether the service can serve, and returns a channel that is closed when
// that may have changed: while its store can be used, when the store tells (SQLStore.Serving:
// a PostgreSQL database that does not answer), always otherwise. It implements
// server.HealthSource, so the memory stage's gRPC health is NOT_SERVING while its calls could
// only fail with STORAGE_ERROR, for balancers and readiness probes to move away.
func (s *Service) Serving() (bool, <-chan struct{}) {
	if h, ok := s.store.(healthReporter); ok {
		return h.Serving()
	}
	return true, nil
}

// healthReporter is a Store that tells whether it can be used (SQLStore.Serving).
type healthReporter interface {
	Serving() (serving bool, changed <-chan struct{})
}
