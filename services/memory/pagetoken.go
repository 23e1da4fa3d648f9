package memory

import (
	"encoding/base64"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentmesh/agentmesh/pkg/stageerr"
)

// encodePageToken returns the opaque token for the position after c.
func encodePageToken(c Cursor) string {
	raw := strconv.FormatInt(c.CreatedAt.UnixNano(), 10) + "|" + c.ID
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

// decodePageToken parses a token made by encodePageToken; "" is the first page (nil). A token
// whose id no memory can have (empty, longer than MaxNameBytes, holding NUL or bytes that are not
// UTF-8) is refused as any other token List did not return: the stores keep ids as text, which
// PostgreSQL's cannot hold such bytes in, and every store refuses it alike.
func decodePageToken(token string) (*Cursor, error) {
	if token == "" {
		return nil, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return nil, stageerr.Invalid("page_token is not a token returned by List")
	}
	nanos, id, ok := strings.Cut(string(raw), "|")
	n, err := strconv.ParseInt(nanos, 10, 64)
	if !ok || err != nil || id == "" || len(id) > MaxNameBytes || !utf8.ValidString(id) ||
		strings.IndexByte(id, 0) >= 0 {
		return nil, stageerr.Invalid("page_token is not a token returned by List")
	}
	return &Cursor{CreatedAt: time.Unix(0, n).UTC(), ID: id}, nil
}
