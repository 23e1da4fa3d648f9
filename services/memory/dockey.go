package memory

import (
	"crypto/sha256"
	"encoding/hex"

	memoryv1 "github.com/agentmesh/agentmesh/gen/agentmesh/memory/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
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
	return digest([]byte(m.GetCollection()), []byte(m.GetConversationId()),
		[]byte(m.GetContent()), meta)
}

// DocumentName names the document a chunk (a memory whose metadata has a non-empty MetaSource
// string, as IngestDir stores) is of: a digest of its collection, conversation, and the
// MetaSource and MetaFolder strings of its metadata, so the chunks of one file of a folder
// share it whatever their text. Store.PutDocument replaces the user's memories of one name as
// a unit. It is "" for a memory of no document.
func DocumentName(m *memoryv1.Memory) string {
	return documentNameOf(m.GetCollection(), m.GetConversationId(), m.GetMetadata())
}

// documentNameOf is the DocumentName of a memory of collection and conversation with the
// metadata meta.
func documentNameOf(collection, conversation string, meta *structpb.Struct) string {
	source := meta.GetFields()[MetaSource].GetStringValue()
	if source == "" {
		return ""
	}
	return digest([]byte("document"), []byte(collection), []byte(conversation), []byte(source),
		[]byte(meta.GetFields()[MetaFolder].GetStringValue()))
}

// digest is the hex SHA-256 of parts, each preceded by its length, so no two lists of parts
// have the same digest by where one part ends and the next begins.
func digest(parts ...[]byte) string {
	h := sha256.New()
	for _, part := range parts {
		var n [8]byte
		for i := range n {
			n[i] = byte(len(part) >> (8 * i))
		}
		h.Write(n[:])
		h.Write(part)
	}
	return hex.EncodeToString(h.Sum(nil))
}
