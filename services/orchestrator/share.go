package orchestrator

import (
	typev1 "github.com/agentmesh/agentmesh/gen/agentmesh/type/v1"
	"google.golang.org/protobuf/proto"
)

// shareHistory points each message of assembled, the context stage's assembly of the
// conversation, that equals the conversation's message in its place at the conversation's
// own. The stage returns most of the conversation unchanged, but each turn decodes it anew:
// the run would hold every message twice while the model answers, and the assembly is kept
// for the turn's attempts (issue 15). The stage keeps the leading messages (the system
// prompt) and the newest, in their order, and may add some between them (the plan's step,
// recalled memories) or drop older ones: the messages are matched from the front, then from
// the back, each side while they are equal. Only equal messages are shared, and the run never
// changes a message of its conversation while the turn's attempts use the assembly.
func shareHistory(assembled, conversation []*typev1.Message) {
	front := 0
	for ; front < len(assembled) && front < len(conversation); front++ {
		if !proto.Equal(assembled[front], conversation[front]) {
			break
		}
		assembled[front] = conversation[front]
	}
	for a, c := len(assembled)-1, len(conversation)-1; a >= front && c >= front; a, c = a-1, c-1 {
		if !proto.Equal(assembled[a], conversation[c]) {
			return
		}
		assembled[a] = conversation[c]
	}
}
