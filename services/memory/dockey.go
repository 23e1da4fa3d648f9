package memory

import (
	"crypto/sha256"
	"encoding/hex"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"google.golang.org/protobuf/proto"
)

// documentKey identifies a chunk of a document: a memory whose metadata has a non-empty
// MetaSource string, as IngestDir stores. Its key is a digest of its collection, conversation,
// content and metadata, so two memories have the same key when they are the same chunk of the
// same document (the same source, folder, title and chunk index, with the same text). A Store
// holds one memory of a user per key: storing a chunk again replaces the one stored before,
// so ingestions of the same document at the same time leave one set of chunks. The key is ""
// (no such rule) for every other memory.
func documentKey(m *memoryv1.Memory) string {
	if m.GetMetadata().GetFields()[MetaSource].GetStringValue() == "" {
		return ""
	}
	meta, err := proto.MarshalOptions{Deterministic: true}.Marshal(m.GetMetadata())
	if err != nil {
		return "" // metadata the service checked always encodes; else no key, as before
	}
	h := sha256.New()
	for _, part := range [][]byte{[]byte(m.GetCollection()), []byte(m.GetConversationId()),
		[]byte(m.GetContent()), meta} {
		var n [8]byte
		for i := range n {
			n[i] = byte(len(part) >> (8 * i))
		}
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
