// Package orchestrator implements the public AgentService: it owns every run — the
// ExecutionContract, the budgets, the state machine, the transcript, accounting and events —
// and drives the stage services over gRPC.
//
// The decision loop (DESIGN §6) is PRECHECK → INTENT → PLAN → [ASSEMBLE → INFER →
// VALIDATE_CALLS → EXECUTE → OBSERVE → COMMIT]* → TERMINATE. Every transition appends a
// transcript entry and gets a span; every turn ends in COMMIT, which evaluates the transition
// predicates in the Monolith order (interrupt/timeout → budgets → policy → context →
// success → continue); TERMINATE happens exactly once and publishes run_finished last.
package orchestrator
