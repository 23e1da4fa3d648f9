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

// Failed returns a channel that yields the error that stops the service for good, when its
// store tells (SQLStore.Failed: a schema upgrade that cannot be done), nil otherwise. It
// implements server.Failer, so that the memory stage exits with it rather than serve without
// the index it could not build.
func (s *Service) Failed() <-chan error {
	if f, ok := s.store.(failer); ok {
		return f.Failed()
	}
	return nil
}

// failer is a Store that can fail for good while it is open (SQLStore.Failed).
type failer interface {
	Failed() <-chan error
}
