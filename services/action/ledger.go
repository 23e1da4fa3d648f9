package action

import (
	"context"
	"errors"

	actionv1 "github.com/agentmesh/agentmesh/gen/agentmesh/action/v1"
)

// Ledger is the record of every tool call, one actionv1.CallRecord per (run_id, call_id):
// written as started once the call holds its queue slot, before its tool runs, and as done,
// with the response, after. No tool runs unless its call's started record was written where
// the call had none, or over the record the service read, so a call whose record is done
// answers from it and a call whose record is started is never run blindly again. Shared by
// every replica of the stage (KVLedger), it makes that hold across the mesh and across
// restarts; the in-memory ledger New uses without one holds only within a process.
//
// Writes are compare-and-set on the record's revision, so of two replicas racing for a call
// exactly one writes it. An error other than ErrNoRecord and ErrRecordChanged means that the
// ledger is unavailable. Implementations are safe for concurrent use.
type Ledger interface {
	// Get returns the call's record and its revision, or ErrNoRecord.
	Get(ctx context.Context, runID, callID string) (*actionv1.CallRecord, uint64, error)
	// Put stores rec as the record of its call if that record is still at revision, 0
	// meaning that the call has no record, and returns the record's new revision; otherwise
	// it stores nothing and returns ErrRecordChanged.
	Put(ctx context.Context, rec *actionv1.CallRecord, revision uint64) (uint64, error)
	// Wait returns once the call's record is no longer at revision (0: once it has one), or
	// with ctx's error when ctx ends first.
	Wait(ctx context.Context, runID, callID string, revision uint64) error
	// Instance names this process in the started records it writes, and makes it known as
	// alive (for as long as it lives) before returning.
	Instance(ctx context.Context) (string, error)
	// Alive reports whether the process an instance names still lives: a call it started may
	// still finish there, while one started by a dead instance never will.
	Alive(ctx context.Context, instance string) (bool, error)
}

// Errors of a Ledger that are answers, not failures.
var (
	// ErrNoRecord is Get's answer for a call that has no record.
	ErrNoRecord = errors.New("no record of the call")
	// ErrRecordChanged is Put's answer when another writer changed the call's record first.
	ErrRecordChanged = errors.New("the call's record changed")
)
