package orchestrator

import (
	"context"
	"time"

	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// StageWait is how long an idempotent call to a stage waits for the stage to be ready (one
// that is restarting, or that the connection has not reached again yet) before it fails
// UNAVAILABLE, which ends a run STAGE_UNAVAILABLE. It bounds the whole call, so a stage that
// hangs fails the same way; the step and run timeouts bound it too.
const StageWait = 10 * time.Second

// whenReady makes an idempotent stage call with gRPC's wait-for-ready: while the stage cannot
// be reached, the call waits for it to serve again, up to StageWait, instead of failing at
// once. Only calls that may safely reach a stage again go through it — intent, planning,
// context assembly, observation, recovery, memory reads, ListTools and ListProviders — never
// Generate, GenerateStream or Execute, whose failures the run accounts and recovers from
// itself. A call cut short by StageWait (not by ctx) fails UNAVAILABLE, naming the stage.
func whenReady[Req, Resp any](ctx context.Context, stage string, call func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	return whenReadyWithin(ctx, stage, StageWait, call, req)
}

// whenReadyWithin is whenReady bounded by wait instead of StageWait, for a stage that may ask
// a model before it answers (intent, planning, observation).
func whenReadyWithin[Req, Resp any](ctx context.Context, stage string, wait time.Duration, call func(context.Context, Req, ...grpc.CallOption) (Resp, error), req Req) (Resp, error) {
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	resp, err := call(wctx, req, grpc.WaitForReady(true))
	if err != nil && ctx.Err() == nil && wctx.Err() != nil {
		err = status.Errorf(codes.Unavailable, "the %s stage did not answer within %s (down or restarting): %s",
			stage, wait, status.Convert(err).Message())
	}
	return resp, err
}

// modelStageWait bounds a call to a stage that may ask a model before it answers (intent,
// planning, observation's summary): the run's step timeout, and at least StageWait. StageWait
// alone failed such a call while its model was still answering, or while a large result was
// parsed.
func (r *run) modelStageWait() time.Duration {
	return modelStageWait(r.contract)
}

// modelStageWait is the wait for a stage that may ask a model under contract c (see
// run.modelStageWait).
func modelStageWait(c *typev1.ExecutionContract) time.Duration {
	return max(StageWait, time.Duration(c.GetStepTimeoutMs())*time.Millisecond)
}
