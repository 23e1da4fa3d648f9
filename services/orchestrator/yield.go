package orchestrator

import "context"

// A unary Run's handler waits for its run anyway, so the run executes on the handler's
// goroutine (runHere) instead of on one of its own: a run waiting on its model then holds one
// goroutine and its stack, not two. The handler must answer when the run first pauses for a
// person (approval, the plan's approval, a question), while the run waits on: there the run
// yields its goroutine. The pause returns a yield ending, which stops the run's work like a
// hand-off (stop) and carries resume, the rest of the run's work from the pause on; each
// caller with work left after the call adds it (then). runHere then continues the run on a
// goroutine of its own from resume, and the handler answers with the paused snapshot. The run
// keeps all its state in memory, and decisions or answers that arrive between the two find the
// pause where they did before (r.approval, r.asking, the inbox).

// yield is the ending of a pause that gives the handler's goroutine back: resume continues the
// pause (a call of the waiting function again, which finds its pause in r.approval or
// r.asking and waits on). It is nil when the run does not execute on a handler's goroutine.
func (r *run) yield(resume func(context.Context) *ending) *ending {
	if !r.inline {
		return nil
	}
	return &ending{stop: true, reason: "paused: the run continues on a goroutine of its own", resume: resume}
}

// then returns e, adding rest to its resume when e yields: rest runs after what resumes the
// pause, when that returns nil (the caller's own work after the call that yielded).
func (e *ending) then(rest func(context.Context) *ending) *ending {
	if e == nil || e.resume == nil {
		return e
	}
	before := e.resume
	e.resume = func(ctx context.Context) *ending {
		if end := before(ctx); end != nil {
			return end
		}
		return rest(ctx)
	}
	return e
}

// instead returns e, resuming with resume instead when e yields: for a caller whose own start
// continues the pause (it calls the waiting function again) and that has work after it.
func (e *ending) instead(resume func(context.Context) *ending) *ending {
	if e != nil && e.resume != nil {
		e.resume = resume
	}
	return e
}

// runHere executes the run on the calling goroutine, a unary Run's handler, until it ends or
// yields at a pause; a run that yields continues on a goroutine of its own, which retires it.
func (s *Service) runHere(ctx context.Context, r *run) {
	yielded := false
	defer func() {
		if !yielded {
			s.retire(ctx, r)
		}
	}()
	r.inline = true
	r.main(ctx)
	if r.resume == nil {
		return
	}
	yielded = true
	r.inline = false // the run's later pauses wait on its own goroutine
	go func() {
		defer s.retire(ctx, r)
		r.execute(ctx)
	}()
}
