// Package auth authenticates the callers of the public API and carries who they are through a
// call: API keys (kept only as SHA-256 hashes) and client certificates (mTLS) each map to a
// Principal, which the server's Admission puts in the call's context. The orchestrator decides what a
// principal may do with a run (its owner, its tenant's administrators and approvers, admins).
package auth
