package orchestrator

import (
	"crypto/sha256"
	"encoding/hex"

	agentv1 "github.com/agentmesh/agentmesh/gen/agentmesh/agent/v1"
	"google.golang.org/protobuf/proto"
)

// requestFingerprint tells a retry of a run request from another request with its idempotency
// key: a hash of the request's deterministic encoding, without its user_id, to which the key
// is scoped already (a request naming its user and one leaving it to the authenticated
// principal are the same request). Only requests with a key are fingerprinted.
func requestFingerprint(req *agentv1.RunRequest) string {
	req = proto.CloneOf(req)
	req.UserId = ""
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil { // a request that validated encodes; an empty print matches any request
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
