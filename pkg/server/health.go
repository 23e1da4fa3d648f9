package server

import (
	"io"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// HealthSource tells whether a service can serve right now. A service whose ability to serve
// depends on something that comes and goes while it runs (the orchestrator cannot serve while
// run events cannot be stored) has a HealthSource, and the server's health service reports it
// NOT_SERVING meanwhile, so that load balancers and health checks move traffic away.
type HealthSource interface {
	// Serving reports whether the service can serve now, and returns a channel that is closed
	// when that may have changed.
	Serving() (serving bool, changed <-chan struct{})
}

// HealthFunc adapts a function to a HealthSource.
type HealthFunc func() (serving bool, changed <-chan struct{})

// Serving returns f().
func (f HealthFunc) Serving() (bool, <-chan struct{}) { return f() }

// WithHealth returns r with its health told by source: Main reports the service SERVING
// while source says it can serve, NOT_SERVING otherwise.
func WithHealth(r Registrar, source HealthSource) Registrar {
	return reporting{Registrar: r, source: source}
}

type reporting struct {
	Registrar
	source HealthSource
}

func (r reporting) Serving() (bool, <-chan struct{}) { return r.source.Serving() }

func (r reporting) Unwrap() Registrar { return r.Registrar }

// as returns the first of r and the Registrars it wraps (see WithClose and WithHealth) that is
// a T.
func as[T any](r Registrar) (T, bool) {
	for r != nil {
		if t, ok := r.(T); ok {
			return t, true
		}
		w, ok := r.(interface{ Unwrap() Registrar })
		if !ok {
			break
		}
		r = w.Unwrap()
	}
	var zero T
	return zero, false
}

// closerOf returns r's io.Closer: r itself or a Registrar it wraps.
func closerOf(r Registrar) (io.Closer, bool) { return as[io.Closer](r) }

// healthOf returns r's HealthSource, or nil when neither r nor a Registrar it wraps has one.
func healthOf(r Registrar) HealthSource {
	h, _ := as[HealthSource](r)
	return h
}

// reportHealth reports every service SERVING, or what Options.Health says, on the health
// service; with a HealthSource it goes on reporting its changes until Shutdown. Once Shutdown
// has begun (a Serve that began late, as Start's can when Shutdown comes right after Start) it
// leaves the HealthSource alone: Shutdown may no longer wait for a follower started now, and
// Main closes the service once Shutdown returns.
func (s *Server) reportHealth() {
	if s.opts.Health == nil {
		s.setServing(true)
		return
	}
	done := make(chan struct{})
	s.mu.Lock()
	select {
	case <-s.stopHealth:
		s.mu.Unlock()
		return
	default:
	}
	s.healthDone = done // under mu with the look at stopHealth: Shutdown finds it, or it is not started
	s.mu.Unlock()
	serving, changed := s.opts.Health.Serving()
	s.setServing(serving)
	go func() {
		defer close(done)
		for {
			select {
			case <-changed:
			case <-s.stopHealth:
				return
			}
			was := serving
			serving, changed = s.opts.Health.Serving()
			s.setServing(serving)
			switch {
			case was && !serving:
				s.log.Warn("not serving: the service cannot serve for now", "service", s.opts.Name)
			case !was && serving:
				s.log.Info("serving again", "service", s.opts.Name)
			}
		}
	}()
}

// setServing reports the server, the service named in Options and every registered service
// SERVING or NOT_SERVING. It has no effect once Shutdown has begun.
func (s *Server) setServing(serving bool) {
	status := healthpb.HealthCheckResponse_NOT_SERVING
	if serving {
		status = healthpb.HealthCheckResponse_SERVING
	}
	s.health.SetServingStatus("", status)
	if s.opts.Name != "" {
		s.health.SetServingStatus(s.opts.Name, status)
	}
	for name := range s.grpc.GetServiceInfo() {
		s.health.SetServingStatus(name, status)
	}
}
