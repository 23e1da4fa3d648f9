package orchestrator

import (
	"context"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"github.com/agentmesh/agentmesh/pkg/auth"
	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// Page sizes of ListMemories: the memory stage's.
const (
	// DefaultMemoriesPageSize is the page size of a ListMemories whose page_size is 0.
	DefaultMemoriesPageSize = 50
	// MaxMemoriesPageSize is the largest page_size of a ListMemories.
	MaxMemoriesPageSize = 500
)

// ListMemories pages through the personal memories of the caller, newest first: the facts the
// memory stage learned from its runs, and whatever else was stored for it.
func (s *Service) ListMemories(ctx context.Context, req *agentv1.ListMemoriesRequest) (*agentv1.ListMemoriesResponse, error) {
	if n := req.GetPageSize(); n < 0 || n > MaxMemoriesPageSize {
		return nil, stageerr.Invalid("page_size: between 0 and %d, got %d", MaxMemoriesPageSize, n)
	}
	owner, err := s.memoryOwner(ctx, req.GetUserId(), "list the memories of user ")
	if err != nil {
		return nil, err
	}
	resp, err := whenReady(auth.OutgoingUser(ctx, owner), "memory", s.peers.Memory.List, &memoryv1.ListRequest{
		UserId: owner, PageSize: req.GetPageSize(), PageToken: req.GetPageToken(),
	})
	if err != nil {
		return nil, stageerr.FromError(err)
	}
	return &agentv1.ListMemoriesResponse{Memories: resp.GetMemories(), NextPageToken: resp.GetNextPageToken()}, nil
}

// DeleteMemory deletes one of the caller's memories; one the caller does not hold (another
// user's included) is NOT_FOUND.
func (s *Service) DeleteMemory(ctx context.Context, req *agentv1.DeleteMemoryRequest) (*agentv1.DeleteMemoryResponse, error) {
	if req.GetMemoryId() == "" {
		return nil, stageerr.Invalid("memory_id must not be empty")
	}
	owner, err := s.memoryOwner(ctx, req.GetUserId(), "delete a memory of user ")
	if err != nil {
		return nil, err
	}
	resp, err := whenReady(auth.OutgoingUser(ctx, owner), "memory", s.peers.Memory.Delete, &memoryv1.DeleteRequest{
		UserId: owner, MemoryId: req.GetMemoryId(),
	})
	if err != nil {
		return nil, stageerr.FromError(err)
	}
	if !resp.GetDeleted() {
		// A memory stage may answer a memory the user does not hold with deleted=false rather
		// than NOT_FOUND (its contract allows both): the caller is told NOT_FOUND either way.
		return nil, stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_NOT_FOUND, "memory %q not found", req.GetMemoryId())
	}
	return &agentv1.DeleteMemoryResponse{MemoryId: req.GetMemoryId()}, nil
}

// memoryOwner is the user whose memories a call reads or changes. With authentication on it
// is the principal's own id, which requested may name (its user or its id) or leave empty;
// any other user is PERMISSION_DENIED, for admins too: memories are their owner's alone. With
// authentication off it is requested, or "anonymous", as for runs.
func (s *Service) memoryOwner(ctx context.Context, requested, what string) (string, error) {
	if err := checkUserID(requested); err != nil {
		return "", err
	}
	p, ok := auth.FromContext(ctx)
	switch {
	case !ok && requested == "":
		return anonymous, nil
	case !ok:
		return requested, nil
	case requested == "" || requested == p.User || requested == p.ID():
		return p.ID(), nil
	}
	s.denied(ctx, p, what+requested, "")
	return "", stageerr.Errorf(typev1.StageErrorCode_STAGE_ERROR_CODE_PERMISSION_DENIED,
		"user_id %q is not the authenticated principal %q: a principal sees and deletes only its own memories", requested, p.ID())
}
