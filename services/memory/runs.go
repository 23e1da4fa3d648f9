package memory

import (
	"context"
	"errors"
	"fmt"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/runid"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// AppendTranscript appends entries to a run's transcript. They must continue the stored
// chain (see VerifyAppend), otherwise the call fails with FAILED_PRECONDITION. Only the
// orchestrator may call it when callers are identified (Options.MeshIdentity).
func (s *Service) AppendTranscript(ctx context.Context, req *memoryv1.AppendTranscriptRequest) (*memoryv1.AppendTranscriptResponse, error) {
	if err := s.orchestratorOnly(ctx, "AppendTranscript"); err != nil {
		return nil, err
	}
	if err := checkRun("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	if len(req.GetEntries()) == 0 {
		return nil, stageerr.Invalid("entries must not be empty")
	}
	for i, e := range req.GetEntries() {
		if e.GetHash() == "" {
			return nil, stageerr.Invalid("entries[%d].hash must not be empty", i)
		}
		// The SQL stores keep it as text, to continue the chain from.
		if err := checkNoNUL(fmt.Sprintf("entries[%d].hash", i), e.GetHash()); err != nil {
			return nil, err
		}
	}
	length, err := s.store.AppendTranscript(ctx, req.GetRunId(), req.GetEntries())
	if err != nil {
		return nil, s.storeError(ctx, "append transcript", err)
	}
	return &memoryv1.AppendTranscriptResponse{Length: length}, nil
}

// SaveRun stores a copy of a run's result, replacing an earlier save of the same run. Its
// user_id, the run's owner, is the user the call acts for, as for Store. Only the orchestrator
// may call it when callers are identified (Options.MeshIdentity). The first save of a run
// queues it, in the same write, for learning (see the package documentation), which happens
// after SaveRun has answered.
func (s *Service) SaveRun(ctx context.Context, req *memoryv1.SaveRunRequest) (*memoryv1.SaveRunResponse, error) {
	if err := s.orchestratorOnly(ctx, "SaveRun"); err != nil {
		return nil, err
	}
	// A run may be saved for no user (empty user_id), never for one of any size.
	if n := len(req.GetUserId()); n > MaxUserIDBytes {
		return nil, stageerr.Invalid("user_id: at most %d bytes, got %d", MaxUserIDBytes, n)
	}
	user, err := s.actingUser(ctx, req.GetUserId())
	if err != nil {
		return nil, err
	}
	if err := checkNoNUL("user_id", user); err != nil {
		return nil, err
	}
	runID := req.GetResult().GetRunId()
	if err := checkRun("result.run_id", runID); err != nil {
		return nil, err
	}
	if err := s.store.SaveRun(ctx, user, req.GetResult()); err != nil {
		return nil, s.storeError(ctx, "save run", err)
	}
	s.learnSoon()
	return &memoryv1.SaveRunResponse{RunId: runID}, nil
}

// GetRun returns a stored run result; its transcript is the stored chain when entries were
// appended for the run, and its learning what the service learned from it, once it has. An unknown run is NOT_FOUND; a run the user the call acts for may not
// read (auth.Principal.May) is PERMISSION_DENIED.
func (s *Service) GetRun(ctx context.Context, req *memoryv1.GetRunRequest) (*memoryv1.GetRunResponse, error) {
	p, acting, err := s.actor(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkRun("run_id", req.GetRunId()); err != nil {
		return nil, err
	}
	result, userID, err := s.store.GetRun(ctx, req.GetRunId())
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "run %q not found", req.GetRunId())
		}
		return nil, s.storeError(ctx, "get run", err)
	}
	if err := s.mayRead(ctx, p, acting, req.GetRunId(), userID); err != nil {
		return nil, err
	}
	return &memoryv1.GetRunResponse{Result: result, UserId: userID}, nil
}

// checkRun refuses a request whose field, a run id, is empty or no run id (runid.Check): an id
// of any size or characters would be stored and keyed, and traced as the run learned from.
func checkRun(field, id string) error {
	if id == "" {
		return stageerr.Invalid("%s must not be empty", field)
	}
	return runid.CheckField(field, id)
}
